/**
 * Fails when a value, serialized, contains any of the secrets or a field that only the store may hold.
 * Errors are inspected through their message, own fields and cause.
 */
export function assertNoSecrets(value: unknown, secrets: string[]): void {
  const text = serialize(value);
  for (const secret of secrets) {
    if (secret && text.includes(secret))
      throw new Error(`secret leaked: found "${secret.slice(0, 8)}…" in ${text.slice(0, 200)}`);
  }
  for (const field of ['tokenHash', 'idempotencyKeyHash', 'principalHash']) {
    if (text.includes(`"${field}"`))
      throw new Error(`secret leaked: field ${field} in ${text.slice(0, 200)}`);
  }
}

function serialize(value: unknown): string {
  if (value instanceof Error) {
    return JSON.stringify({
      ...value,
      message: value.message,
      stack: value.stack,
      cause: serialize(value.cause),
    });
  }
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}
