/**
 * Retry-After as delta-seconds (the participant contract's form, and what routelock's own 429/503 answers
 * send); anything else, an HTTP-date from a gateway included, is ignored. In core because the public
 * client reads it too and must not reach the migration layer.
 */
export function parseRetryAfter(header: string | null | undefined): number | undefined {
  if (header === null || header === undefined || !/^\s*\d+\s*$/.test(header)) return undefined;
  return Number(header.trim());
}
