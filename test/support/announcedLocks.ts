import type {
  HardDeleteLock,
  Lock,
  LocationDocument,
  PrelockLock,
  WriteLock,
} from '../../shared/core/lock/document';
import { T0, productionTiming, seconds } from './timing';

/**
 * Locks as the rules write them, for the read-path table tests (production timing, instants in seconds
 * after T0): an announced lock in hard-delete from its pre-lock, in force from acquiredAt + L; its write
 * window at W (readers from W − S, activation from W + S until W + A − S, A = 305 s); the write lock
 * activated at W + 5 s; and a legacy pre-lock starting a convergence delay after it was taken.
 */

const timing = productionTiming;
const L = timing.announceLeadSeconds;

export const at = (s: number): number => T0 + seconds(s);
export const iso = (s: number): string => new Date(at(s)).toISOString();

export const W = 20_000;
export const WINDOW_UNTIL = W + 305;
export const WRITE_END = W + 5 + 300;

export const lockBase = {
  tokenHash: 'h',
  migrationId: 'm-1',
  owner: 'o',
  target: { region: 'eastus' },
  acquiredAt: iso(0),
  expiresAt: iso(100_000),
  maxExpiresAt: iso(200_000),
  convergenceDelaySeconds: timing.convergenceDelaySeconds,
};

export const announcedHardDelete: HardDeleteLock = {
  ...lockBase,
  announceLeadSeconds: L,
  phase: 'hardDelete',
  startsAt: iso(L),
  hardDeleteAt: iso(L),
  hardDeleteExpiresAt: iso(L + 21_600),
};
export const announcedWindow: HardDeleteLock = {
  ...announcedHardDelete,
  writeWindowAt: iso(W),
  writeWindowUntil: iso(WINDOW_UNTIL),
};
export const announcedWrite: WriteLock = {
  ...announcedWindow,
  phase: 'write',
  writeAt: iso(W + 5),
  writeExpiresAt: iso(WRITE_END),
};
export const legacyPrelock: PrelockLock = { ...lockBase, phase: 'prelock', startsAt: iso(7500) };

/** A route at the source under `lock`, at schema version 2. */
export const docUnder = (lock: Lock | null): LocationDocument => ({
  id: 'r',
  schemaVersion: 2,
  location: { region: 'westeurope' },
  lock,
  secondary: null,
  lastMigration: null,
});
