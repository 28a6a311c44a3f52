/**
 * Which participants a migration calls (design §6.5): chosen once at start from the configured
 * list by each one's `resources` patterns, and captured in the migration's input.
 */

export interface Participant {
  name: string;
  /**
   * Where the participant contract's POST goes (design §6.5): 200 done, or 202 + Location to poll.
   * https:// (http:// only to a loopback host), with no credentials, query or fragment: it is copied into
   * every migration's stored input.
   */
  url: string;
  /**
   * Entra ID audience (an app ID URI or client id) of the participant's API: when set, each call
   * carries `Authorization: Bearer <managed-identity token for it>` (scope `<audience>/.default`).
   */
  audience?: string;
  /**
   * The resource ids this participant owns, as patterns where `*` matches any run of characters (nothing
   * else is special). Absent: every resource. A migration calls only the participants `participantsFor`
   * picks for its resource, chosen once at start.
   */
  resources?: string[];
}

/** Whether a resource id matches one `resources` pattern: `*` is any run of characters, the rest literal. */
export function matchesResourcePattern(resourceId: string, pattern: string): boolean {
  const [first = '', ...rest] = pattern.split('*');
  if (rest.length === 0) return resourceId === first;
  const last = rest.pop() as string;
  if (!resourceId.startsWith(first) || resourceId.length < first.length + last.length) return false;
  // The middle pieces in order, each after the one before, all before the suffix (leftmost match suffices).
  let at = first.length;
  const end = resourceId.length - last.length;
  for (const piece of rest) {
    const found = resourceId.indexOf(piece, at);
    if (found < 0 || found + piece.length > end) return false;
    at = found + piece.length;
  }
  return resourceId.endsWith(last);
}

/** The participants a migration of this resource calls: those without `resources`, and those it matches. */
export function participantsFor(resourceId: string, participants: readonly Participant[]): Participant[] {
  return participants.filter(
    (p) =>
      p.resources === undefined || p.resources.some((pattern) => matchesResourcePattern(resourceId, pattern)),
  );
}
