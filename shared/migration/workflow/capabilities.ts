import { type MigrationInput, WORKFLOW_VERSION } from '../types';

/**
 * Workflow versioning (docs/design.md §6.7). A running instance must replay the steps it recorded, so a
 * change of the workflow's steps is taken only by instances started with it: each such change is a
 * named capability, introduced by the workflow version that first runs it, and an instance's
 * capabilities are fixed once, at its start, from the version its input records (migrationWorkflow
 * checks them before its first step). A phase asks for one by name,
 * `has(workflowCapabilities(state.input), name)`, never compares version numbers: the input never
 * changes, so the answer is the one fixed at the start.
 *
 * Retiring a capability (Temporal's `patched` → `deprecatePatch` → delete):
 * 1. introduce it: raise WORKFLOW_VERSION, add `name: <that version>` to CAPABILITIES, branch on
 *    `has(capabilities, name)`, record the new version's replay fixtures;
 * 2. once no running instance can hold an older version (every deployment's task hub shows no
 *    instance Pending, Running or Suspended below it), raise WORKFLOW_FLOOR to the capability's version:
 *    every instance now has it, so the branch keeps only its new side and the old fixtures go;
 * 3. delete the name from CAPABILITIES. An instance of a version below the floor fails at its start
 *    with UnsupportedWorkflowVersion rather than running steps it never recorded.
 */

/** The oldest workflow version this code replays; older (or newer, unknown) instances are refused. */
export const WORKFLOW_FLOOR = 5;

/**
 * Each live capability and the workflow version that introduced it.
 * - `timerFiredIsDue`: a copy loop woken by its durable timer treats the instant that timer was set
 *   for as reached. The engine fires a timer up to a second early (queue visibility is whole
 *   seconds); without it the loop reads the clock, finds nothing due and sleeps again to the same
 *   instant, an episode and an action per repeat (docs/design.md §6.7).
 * - `announcedEscalations`: with `settings.announcedLocks` (fixed at the start from the host's flag) the
 *   pre-lock asks for an announced lock, the hard-delete lock from its grant, and each write-lock attempt
 *   announces its window a lead ahead, renewing the hard-delete lock while it waits (docs/design.md §3.7,
 *   §6). Without the setting the instance runs the path of version 6.
 */
export const CAPABILITIES = { timerFiredIsDue: 6, announcedEscalations: 7 } as const satisfies Record<
  string,
  number
>;

export type Capability = keyof typeof CAPABILITIES;

/** What an instance may do, decided once from the version it started with. */
export type Capabilities<C extends string = Capability> = ReadonlySet<C>;

/** An instance whose recorded version this code does not replay. */
export class UnsupportedWorkflowVersion extends Error {
  override readonly name = 'UnsupportedWorkflowVersion';
  readonly code = 'UnsupportedWorkflowVersion';

  constructor(
    readonly version: number | undefined,
    readonly floor: number,
    readonly current: number,
  ) {
    super(
      `workflow version ${version ?? '1 (none recorded)'} is not replayed by this deployment, which runs versions ${floor} to ${current}`,
    );
  }
}

/** Whether this code replays an instance that started with `version` (absent: version 1). */
export const supportsVersion = (
  version: number | undefined,
  floor = WORKFLOW_FLOOR,
  current = WORKFLOW_VERSION,
): boolean => version !== undefined && Number.isInteger(version) && version >= floor && version <= current;

/**
 * The capabilities of an instance started with `version`, under a table of capabilities and the
 * versions this code replays (a pure function, so the rule is tested with any table).
 */
export function capabilitiesAt<C extends string>(
  version: number | undefined,
  table: Readonly<Record<C, number>>,
  floor: number,
  current: number,
): Capabilities<C> {
  if (!supportsVersion(version, floor, current))
    throw new UnsupportedWorkflowVersion(version, floor, current);
  const names = Object.keys(table) as C[];
  return new Set(names.filter((name) => (version as number) >= table[name]));
}

/** The capabilities of this instance, fixed at its start; throws UnsupportedWorkflowVersion. */
export const workflowCapabilities = (input: Pick<MigrationInput, 'workflowVersion'>): Capabilities =>
  capabilitiesAt<Capability>(input.workflowVersion, CAPABILITIES, WORKFLOW_FLOOR, WORKFLOW_VERSION);

/** Whether an instance has a capability. */
export const has = <C extends string>(capabilities: Capabilities<C>, name: C): boolean =>
  capabilities.has(name);
