import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MigrationInput, ParticipantCall, VerifyAnswer } from '../../shared/migration/types';
import {
  EventType,
  type HttpReply,
  type HttpRequestSeen,
  type ReplayOptions,
  type WireEvent,
} from '../../testkit/durableReplay';
import { activityFunctionName } from '../../functions/durable/runOnDurable';
import { type InputVersion, V5, V6, V7, durableMigration, participantJobs } from './durableMigrations';

/**
 * Durable histories recorded with the orchestrator of the day through the faithful harness, kept as
 * fixtures (test/fixtures/durable/<name>.json, README.md there) so a later orchestrator must replay
 * them: the instances a deployment finds running. Everything in them is reproducible: virtual clock,
 * fixed key ring and seed (public, see FIXTURE_KEYRING), ETags numbered in write order, participants
 * scripted. Record with `ROUTELOCK_RECORD_FIXTURES=1 npx jest test/migration/durableVersioning.test.ts`:
 * it writes only the fixtures not yet on disk (a new version's), since a fixture of a version still
 * deployed never changes.
 */

export const FIXTURE_DIR = join(__dirname, '..', 'fixtures', 'durable');

export interface HistoryScenario {
  /** `v<N>-…`: recorded by the code of workflow version N, with that version's input. */
  name: string;
  version: InputVersion;
  description: string;
  participants: { name: string; url: string }[];
  env: Record<string, string>;
  /** How long each participant job takes (virtual ms); its POST answers 200 when it ends. */
  jobMs: number;
  /** Stop mid-run (a deployment): after the episode where this holds. */
  stopWhen?: ReplayOptions['stopWhen'];
  /** The participant answers `verify` with this (absent: 404, not verified). */
  verify?: VerifyAnswer;
}

const MESSAGES = [{ name: 'messages', url: 'https://messages.test/migrate' }];
/**
 * 300 s hard-delete and write leases: renewed every 100 s, so a copy of minutes needs renewals; one delta
 * attempt, because a 300 s hard-delete lease cannot outlast a 900 s overrun (timingInequalities, shared/migration/settings.ts).
 */
const SHORT_LEASES = {
  ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '300',
  ROUTELOCK_WRITE_LEASE_SECONDS: '300',
  ROUTELOCK_DELTA_ATTEMPTS: '1',
};
const isParticipantCall = (a: { name?: string }) => a.name === activityFunctionName('callParticipant');
const isPoll = (a: { name?: string; input?: unknown }) =>
  a.name === activityFunctionName('callParticipant') && (a.input as { method?: string }).method === 'GET';

/** Stopped right after the first poll that follows the first renewal mid-bulk-copy: a deployment then. */
const afterFirstRenewedPoll: ReplayOptions['stopWhen'] = ({ actions }) => {
  const copy = actions.findIndex(isParticipantCall);
  const renew = actions.findIndex((a, i) => i > copy && a.name === 'migrationRenew');
  return copy >= 0 && renew >= 0 && actions.slice(renew).some(isPoll);
};

const MATCH = { match: true, sourceCount: 3, targetCount: 3, digest: 'sha256:fixture' };

/**
 * The histories of version 5: one each of the shapes a deployment can find an instance in (finished
 * without participants, finished with one polled across renewals, stopped mid-bulk-copy, stopped
 * waiting for a cutover window).
 */
const V5_SCENARIOS: HistoryScenario[] = [
  {
    name: 'v5-no-participants',
    version: V5,
    description:
      'a migration without participants: no re-read, no read-path check, the swap confirmed on a replica, completed',
    participants: [],
    env: {},
    jobMs: 0,
  },
  {
    name: 'v5-one-participant',
    version: V5,
    description:
      'one participant answering 202 + Location to each copy, polled until its 200 after 110 s; 300 s leases (renewed every 100 s); no re-read, the read-path check on a replica; verify answers a match; the swap confirmed on a replica; the completed notice delivered',
    participants: MESSAGES,
    env: SHORT_LEASES,
    jobMs: 110_000,
    verify: MATCH,
  },
  {
    name: 'v5-mid-bulk-copy',
    version: V5,
    description:
      'one participant whose bulk copy takes 230 s, answered 202 + Location and polled, 300 s leases (renewed every 100 s); stopped right after the first poll following the first renewal was scheduled',
    participants: MESSAGES,
    env: SHORT_LEASES,
    jobMs: 230_000,
    verify: MATCH,
    stopWhen: afterFirstRenewedPoll,
  },
  {
    name: 'v5-window-wait',
    version: {
      ...V5,
      toInput: (i) => ({
        ...V5.toInput(i),
        window: { daily: { start: '06:00', end: '08:00', timeZone: 'Europe/Berlin' } },
      }),
    },
    description:
      'one participant (20 s copies), a daily cutover window 06:00–08:00 Europe/Berlin: the bulk copy done at once, the write lock waits for 05:00Z on durable timers with hard-delete renewals; stopped after the second renewal of the wait',
    participants: MESSAGES,
    env: {},
    jobMs: 20_000,
    verify: { match: true, sourceCount: 3, targetCount: 3 },
    stopWhen: ({ actions }) => actions.filter((a) => a.name === 'migrationRenew').length >= 2,
  },
];

/**
 * Version 6's histories: the same shapes, its input carrying version 6. The harness fires each timer at
 * its FireAt, so they record the path of a timer that fires on time; an early one is injected by
 * durableVersioning.test.ts.
 */
const V6_SCENARIOS: HistoryScenario[] = V5_SCENARIOS.map((scenario) => ({
  ...scenario,
  name: scenario.name.replace(/^v5-/, 'v6-'),
  version: { ...scenario.version, label: V6.label, toInput: (i) => V6.toInput(scenario.version.toInput(i)) },
}));

/**
 * Version 7's histories, with announced locks on: the dev profile's lead (L = 4 s) and leases, so that a
 * renewal lands its lead before the lease's end (a 300 s lease could not: L ≤ ⅔ lease), and a pre-lock
 * cap of a day, so the daily window is in reach. Each shape as before, and one stopped in the
 * announcement's wait (the hard-delete lock renewed while the window is announced, not yet open).
 */
const ANNOUNCED = {
  ROUTELOCK_PROFILE: 'dev',
  ROUTELOCK_ANNOUNCED_LOCKS: 'true',
  ROUTELOCK_PRELOCK_MAX_SECONDS: '86400',
};
const isAnnounce = (a: { name?: string }) => a.name === activityFunctionName('announce');
/** Jobs within the dev write budget (60 s), still longer than a renewal period (40 s, 10 s for write). */
const DEV_JOB_MS: Record<string, number> = { 'v5-one-participant': 45_000, 'v5-mid-bulk-copy': 50_000 };
const V7_SCENARIOS: HistoryScenario[] = [
  ...V5_SCENARIOS.map((scenario) => ({
    ...scenario,
    name: scenario.name.replace(/^v5-/, 'v7-'),
    jobMs: DEV_JOB_MS[scenario.name] ?? scenario.jobMs,
    description: `${scenario.description}; announced locks (dev timing, a day's pre-lock cap)`,
    // the window's five hours in rounds of a third of an hour's lease, not of dev's 120 s
    env:
      scenario.name === 'v5-window-wait'
        ? { ...ANNOUNCED, ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '3600' }
        : ANNOUNCED,
    version: {
      ...scenario.version,
      label: V7.label,
      toInput: (i: MigrationInput) => V7.toInput(scenario.version.toInput(i)),
    },
  })),
  {
    name: 'v7-announcement-wait',
    version: V7,
    description:
      'one participant (20 s copies), announced locks (dev timing: L = 4 s, 120 s hard-delete lease): the bulk copy done, the write window announced; stopped in the wait for it to open, after the first renewal there',
    participants: MESSAGES,
    env: ANNOUNCED,
    jobMs: 20_000,
    verify: MATCH,
    stopWhen: ({ actions }) => {
      const announced = actions.findIndex(isAnnounce);
      return announced >= 0 && actions.slice(announced).some((a) => a.name === 'migrationRenew');
    },
  },
];

/** Every version's histories still replayed (WORKFLOW_FLOOR to WORKFLOW_VERSION). */
export const SCENARIOS: HistoryScenario[] = [...V5_SCENARIOS, ...V6_SCENARIOS, ...V7_SCENARIOS];

export interface RecordedHistory {
  name: string;
  description: string;
  regenerate: string;
  input: MigrationInput;
  /** The orchestrator's actions (schema V3) on its last run over `history`. */
  orchestratorActions: unknown[];
  history: WireEvent[];
  result: { runtimeStatus: string; output: unknown };
}

/** One scenario's migration: store, record, input and harness, fresh and reproducible. */
export async function scenarioMigration(scenario: HistoryScenario) {
  const { version } = scenario;
  const m = await durableMigration({
    participants: scenario.participants,
    env: scenario.env,
    version,
    reproducible: true,
  });
  const participant = participantJobs({
    answers: version.answers,
    durationMs: () => scenario.jobMs,
    ...(scenario.verify ? { verify: scenario.verify } : {}),
  });
  return { ...m, participant };
}

export async function recordHistory(scenario: HistoryScenario): Promise<RecordedHistory> {
  const m = await scenarioMigration(scenario);
  const result = await m
    .make({ http: m.participant.http, ...(scenario.stopWhen ? { stopWhen: scenario.stopWhen } : {}) })
    .run();
  return {
    name: scenario.name,
    description: scenario.description,
    regenerate: 'ROUTELOCK_RECORD_FIXTURES=1 npx jest test/migration/durableVersioning.test.ts',
    input: m.input,
    orchestratorActions: result.orchestratorActions,
    history: result.history,
    result: { runtimeStatus: result.runtimeStatus, output: result.output ?? null },
  };
}

export const fixturePath = (name: string): string => join(FIXTURE_DIR, `${name}.json`);

export function readHistory(name: string): RecordedHistory {
  return JSON.parse(readFileSync(fixturePath(name), 'utf8')) as RecordedHistory;
}

export const hasHistory = (name: string): boolean => existsSync(fixturePath(name));

/** Writes a new fixture; refuses to overwrite one (an instance of its version may still be running). */
export function writeHistory(recorded: RecordedHistory): void {
  writeFileSync(fixturePath(recorded.name), `${JSON.stringify(recorded, null, 2)}\n`, { flag: 'wx' });
}

const PARTICIPANT_ACTIVITY = activityFunctionName('callParticipant');

/**
 * Bring a fresh store to where a recorded history left it: run the activities the history shows
 * completed, in order, at their recorded times. Each must answer what it answered then (the
 * activities of the day still understand the inputs old instances hand them). Participant calls
 * (callParticipant) are the participant's, not the store's: skipped. Returns mismatches.
 */
export async function replayActivities(
  recorded: RecordedHistory,
  runActivity: (fn: string, input: unknown, now: number) => Promise<unknown>,
): Promise<string[]> {
  const results = new Map<number, WireEvent>();
  for (const e of recorded.history)
    if (e.EventType === EventType.TaskCompleted || e.EventType === EventType.TaskFailed)
      results.set(e.TaskScheduledId as number, e);
  const mismatches: string[] = [];
  for (const e of recorded.history) {
    if (e.EventType !== EventType.TaskScheduled || e.Name === PARTICIPANT_ACTIVITY) continue;
    const answer = results.get(e.EventId);
    if (answer?.EventType !== EventType.TaskCompleted) continue;
    const input = (JSON.parse(e.Input as string) as unknown[])[0];
    const value = await runActivity(e.Name as string, input, Date.parse(e.Timestamp));
    if (JSON.stringify(value ?? null) !== answer.Result)
      mismatches.push(`${e.EventId} ${String(e.Name)}: ${JSON.stringify(value)} ≠ ${String(answer.Result)}`);
  }
  return mismatches;
}

/**
 * The participant service outlives a deployment of the app: hand it the jobs the recorded history
 * POSTed through `callParticipant`, at their recorded times, so the resumed run finds each
 * job where the old process left it. Answers the POSTs' times.
 */
export function primeParticipant(
  recorded: RecordedHistory,
  http: (request: HttpRequestSeen) => HttpReply,
): number[] {
  const posted: number[] = [];
  for (const e of recorded.history) {
    if (e.EventType !== EventType.TaskScheduled || e.Name !== PARTICIPANT_ACTIVITY) continue;
    const call = (JSON.parse(e.Input as string) as ParticipantCall[])[0];
    if (call?.method !== 'POST') continue;
    const now = Date.parse(e.Timestamp);
    http({ method: 'POST', url: call.participantUrl, body: call.body, headers: {}, now });
    posted.push(now);
  }
  return posted;
}
