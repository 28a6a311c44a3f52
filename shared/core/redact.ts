/**
 * Credential redaction: what a release's reason, a participant's error text or a stored request shows of
 * a credential pasted into it (docs/design.md §6.12). A core utility: the lock rules, the force-release
 * requests and the migration's stopped view all redact the same way.
 */

/**
 * A run that looks like a credential: base64url or base64 of 32+ characters with capitals among
 * lowercase letters or digits (a fencing token, an Idempotency-Key, a function key, a JWT's segments),
 * or 40+ hex digits (a token's hash). A uuid (lowercase hex in short groups) or a lowercase resource id
 * is left alone.
 */
const credentialLike = /[A-Za-z0-9+/_-]{32,}={0,2}/g;
/**
 * A run a person wrote rather than a random one: each part between separators is words (an initial
 * capital or a short acronym, then 3+ lowercase letters; `ContosoRetail`, `DocumentDB`) or digits, as in
 * `Migrate-ContosoRetail-Orders-20261130` or `problems/DeltaCopyTimeout`. Random base64 almost never
 * reads so (none of 200,000 random 32-byte tokens did; test/operations/auditReleaseReason.test.ts runs
 * 2,000 as its control), because a single lowercase letter between capitals or digits breaks it.
 */
const wordlike = /^(?:[A-Z]{0,4}[a-z]{3,}|[A-Z]{2,5}|\d+)+$/;
const readsAsWords = (run: string): boolean =>
  run
    .split(/[-_./+=]+/)
    .filter((part) => part !== '')
    .every((part) => wordlike.test(part));
const looksSecret = (run: string): boolean =>
  /[0-9a-fA-F]{40,}/.test(run) || (/[A-Z]/.test(run) && /[a-z0-9]/.test(run) && !readsAsWords(run));
const redactRuns = (text: string): string =>
  text.replace(credentialLike, (run) => (looksSecret(run) ? '[redacted]' : run));

/**
 * An Azure resource id (`/subscriptions/{id}/resourceGroups/{name}/providers/...`): a path of short
 * names whose slashes would join them into one credential-like run. It is judged name by name instead,
 * so it reads as written and a credential pasted as one of its names is still redacted. Only a run that
 * holds `/subscriptions/` is read so (a URL's host may run into it: `management.azure.com/subscriptions/`);
 * a base64 token holding `/` is judged whole.
 */
const armResourceId = /[A-Za-z0-9+_-]*\/subscriptions\/[A-Za-z0-9._()/-]+/gi;
const credentialOrResourceId = new RegExp(`${armResourceId.source}|${credentialLike.source}`, 'gi');

// Invisible format characters (Unicode Cf: zero-width space U+200B, soft hyphen U+00AD, ...) split a
// run in two without showing: they are removed before redacting and refused in a caller's reason.
export const formatCharacters = /\p{Cf}/gu;

/**
 * `text` with invisible format characters removed and every credential-like run replaced by
 * `[redacted]`. A guard against accidents (a token pasted into a reason, quoted in a participant's
 * answer), not a security boundary: text built to slip past it (a token cut by `.` or `:`, or encoded
 * another way) does, so no credential may be put into text on purpose.
 */
export function redactCredentials(text: string): string {
  return text
    .replace(formatCharacters, '')
    .replace(credentialOrResourceId, (run) =>
      /\/subscriptions\//i.test(run) ? run.split('/').map(redactRuns).join('/') : redactRuns(run),
    );
}
