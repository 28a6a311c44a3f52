import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Fencing tokens: 32 random bytes, base64url. Only the SHA-256 is stored, and comparison is
 * constant-time so a caller cannot learn the hash byte by byte from response timing.
 */
export function newFencingToken(): string {
  return randomBytes(32).toString('base64url');
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

export function tokenMatches(token: string, storedHash: string): boolean {
  const presented = createHash('sha256').update(token, 'utf8').digest();
  const stored = Buffer.from(storedHash, 'hex');
  return stored.length === presented.length && timingSafeEqual(presented, stored);
}

/** Constant-time equality of two hex digests. */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}
