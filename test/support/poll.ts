/** Read until a condition holds (or time out with the last value): for state that changes in the background. */
export async function poll<T>(
  read: () => Promise<T> | T,
  until: (value: T) => boolean,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (until(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out; last ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
