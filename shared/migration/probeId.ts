/**
 * The synthetic probe's resource ids (shared/migration/probe.ts), in a module of their own so the pure telemetry
 * rules can tell a probe route from a service's without loading the probe and its routers.
 */

export const PROBE_PREFIX = 'probe-';

/** Ids starting with `probe-` (any case) are the probe's: the HTTP API refuses them for everyone else. */
export function isProbeId(id: string): boolean {
  return id.toLowerCase().startsWith(PROBE_PREFIX);
}
