/**
 * The lock-hijack attack (docs/design.md §9.2): with nothing but the values a route view, a
 * migration status and a start response show, replay the live pre-lock with every one of them, alone
 * and joined, as the Idempotency-Key and as the owner. Returns the attempts that got a token.
 */
export function hijackCandidates(publicValues: string[]): { keys: string[]; owners: string[] } {
  const values = [...new Set(publicValues.filter((v) => v.length > 0))];
  const joined = values.flatMap((a) =>
    values.filter((b) => b !== a).flatMap((b) => ['', ':', '-', '/'].map((sep) => `${a}${sep}${b}`)),
  );
  return { keys: [...values, ...joined], owners: [...values, 'attacker'] };
}

export async function attemptHijack(
  publicValues: string[],
  attempt: (key: string, owner: string) => Promise<'token' | 'refused'>,
): Promise<{ tried: number; hijacks: string[] }> {
  const { keys, owners } = hijackCandidates(publicValues);
  const hijacks: string[] = [];
  let tried = 0;
  for (const key of keys) {
    for (const owner of owners) {
      tried += 1;
      if ((await attempt(key, owner)) === 'token') hijacks.push(`key "${key}", owner "${owner}"`);
    }
  }
  return { tried, hijacks };
}
