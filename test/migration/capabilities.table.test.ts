import type { MigrationInput } from '../../shared/migration/types';
import { takesAnnouncedLocks } from '../../shared/migration/workflow/announced';
import { WORKFLOW_VERSION } from '../../shared/migration/types';
import {
  CAPABILITIES,
  UnsupportedWorkflowVersion,
  WORKFLOW_FLOOR,
  capabilitiesAt,
  has,
  supportsVersion,
  workflowCapabilities,
} from '../../shared/migration/workflow/capabilities';

/**
 * Workflow versioning (docs/design.md §6.7): an instance's capabilities are named, decided once from the
 * version it started with, and an instance of a version this code does not replay is refused with a
 * typed error. The rule is tested on a made-up table; the live table is checked against the floor.
 */

/** A made-up history: replayed versions 3 to 6, two capabilities introduced by 4 and 6. */
const TABLE = { confirmOnReplica: 4, fewerReads: 6 } as const;
const at = (version: number | undefined) => capabilitiesAt(version, TABLE, 3, 6);

test.each<[number, string[]]>([
  [3, []],
  [4, ['confirmOnReplica']],
  [5, ['confirmOnReplica']],
  [6, ['confirmOnReplica', 'fewerReads']],
])('version %i has %j', (version, names) => {
  expect([...at(version)].sort()).toEqual(names);
});

test('a capability is asked by name', () => {
  expect(has(at(5), 'confirmOnReplica')).toBe(true);
  expect(has(at(5), 'fewerReads')).toBe(false);
});

test.each([
  ['below the floor', 2],
  ['newer than this code', 7],
  ['none recorded (version 1)', undefined],
  ['not a whole number', 4.5],
])('a version %s is refused, typed: UnsupportedWorkflowVersion', (_label, version) => {
  expect(() => at(version)).toThrow(UnsupportedWorkflowVersion);
  try {
    at(version);
  } catch (error) {
    expect(error).toMatchObject({ code: 'UnsupportedWorkflowVersion', version, floor: 3, current: 6 });
  }
});

test('the live table: the floor is at most the current version, and every capability lies above the floor', () => {
  expect(WORKFLOW_FLOOR).toBeLessThanOrEqual(WORKFLOW_VERSION);
  for (const since of Object.values<number>(CAPABILITIES)) {
    expect(since).toBeGreaterThan(WORKFLOW_FLOOR);
    expect(since).toBeLessThanOrEqual(WORKFLOW_VERSION);
  }
});

test('a new migration (WORKFLOW_VERSION) is replayed; a version below the floor is not', () => {
  expect(supportsVersion(WORKFLOW_VERSION)).toBe(true);
  expect(workflowCapabilities({ workflowVersion: WORKFLOW_VERSION })).toBeInstanceOf(Set);
  expect(supportsVersion(WORKFLOW_FLOOR - 1)).toBe(false);
  expect(() => workflowCapabilities({ workflowVersion: WORKFLOW_FLOOR - 1 })).toThrow(
    /workflow version 4 is not replayed by this deployment, which runs versions 5 to 7/,
  );
  expect(() => workflowCapabilities({})).toThrow(UnsupportedWorkflowVersion);
});

test('announcedEscalations: an instance of version 7 has it; it asks for announced locks only with the flag in its input', () => {
  expect(has(workflowCapabilities({ workflowVersion: 7 }), 'announcedEscalations')).toBe(true);
  expect(has(workflowCapabilities({ workflowVersion: 6 }), 'announcedEscalations')).toBe(false);
  const input = (workflowVersion: number, announcedLocks?: true) =>
    ({ workflowVersion, settings: announcedLocks ? { announcedLocks } : {} }) as unknown as MigrationInput;
  expect(takesAnnouncedLocks(input(7, true))).toBe(true);
  expect(takesAnnouncedLocks(input(7))).toBe(false);
  // negative control: a version-6 input that somehow carries the setting keeps version 6's path
  expect(takesAnnouncedLocks(input(6, true))).toBe(false);
});

test('timerFiredIsDue: an instance of version 6 has it, one of version 5 keeps the old path', () => {
  expect(has(workflowCapabilities({ workflowVersion: 6 }), 'timerFiredIsDue')).toBe(true);
  expect(has(workflowCapabilities({ workflowVersion: 5 }), 'timerFiredIsDue')).toBe(false);
});
