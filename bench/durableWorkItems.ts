import { migrationOrchestrator } from '../functions/migrationOrchestrator';
import { parseConfig } from '../shared/config';
import type { ServingProfile } from '../shared/core/profiles';
import type { MigrationStatus } from '../shared/migration/types';
import { DurableReplay } from '../testkit/durableReplay';
import { migrationFixture } from '../testkit/migrationFixture';

/**
 * What one migration costs the Durable backend, measured (docs/operators.md "Sizing the Durable backend"): the real
 * orchestrator replayed through durable-functions' own executor (testkit/durableReplay.ts), the real
 * activities against a real store, participants that finish each copy in `copySeconds` of virtual time
 * (answering 202 + Location and polled, as new migrations (workflow version 2) call them).
 * Counted from the actions the orchestration issued and the runs it took; the harness throws on any
 * other action type (sub-orchestration, external event, entity), so those are 0 by construction.
 *
 * `npm run bench:durable` prints two tables, the migration as it runs by default and the same migration
 * under announced locks (ROUTELOCK_ANNOUNCED_LOCKS=true, docs/design.md §6.3); the two differ only in
 * that setting. test/migration/durableWorkItems.test.ts pins the numbers.
 */

export interface WorkItemCount {
  profile: ServingProfile;
  participants: number;
  /** Lock activity calls scheduled (each attempt), participant requests aside. */
  activities: number;
  /** Durable timers created (the convergence wait, lease-renewal races, grace and retry waits). */
  timers: number;
  /** Participant requests (`callParticipant` activities: each job's POST and its polls). */
  httpCalls: number;
  /** Lock renewals among the activities (a long copy renews its phase lock every third of the lease). */
  renewals: number;
  /** Write windows announced (`announce` activities): one per write-lock attempt under announced locks. */
  announces: number;
  subOrchestrations: 0;
  externalEvents: 0;
  /** Orchestrator executions (episodes): each replays the history and issues the next actions. */
  episodes: number;
  /** Work items dispatched: one per episode, one per activity or HTTP call. */
  workItems: number;
  /**
   * Durable Task Scheduler actions (its billing and throughput unit): the start, and for each
   * activity or HTTP call its scheduling and its result, and each timer's completion.
   */
  schedulerActions: number;
  status: string;
}

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const START = Date.UTC(2026, 2, 1);

export async function countWorkItems(options: {
  profile: ServingProfile;
  participants: number;
  /** Virtual seconds each participant's bulk copy takes (delta copies take 1 s); at most 240 s. */
  copySeconds?: number;
  /** Settings over the profile (e.g. a short hard-delete lease, so renewals fit in a 240 s copy). */
  env?: Record<string, string>;
  /**
   * Verify answered 200 at its POST, as the example message store answers it (it compares at once, no
   * job); by default verify is a job polled like a copy.
   */
  verifyAtOnce?: boolean;
}): Promise<WorkItemCount> {
  const participants = Array.from({ length: options.participants }, (_, i) => ({
    name: `p${i + 1}`,
    url: `https://p${i + 1}.test/migrate`,
  }));
  const config = parseConfig({
    ROUTELOCK_PROFILE: options.profile,
    ...(options.env ?? {}),
    ROUTELOCK_PARTICIPANTS: JSON.stringify(participants),
  });
  const { input, runActivity, activities } = await migrationFixture({
    config,
    start: START,
    source: SOURCE,
    target: TARGET,
  });
  const copyMs = (options.copySeconds ?? 1) * 1000;
  // A participant as the contract asks (docs/design.md §6.5): a job's POST answers 202 + Location, its
  // polls 202 until the job ends (bulk copy: copySeconds; delta and verify: 1 s), then 200 (verify: a
  // match, as workflow version 4 asks it after each delta).
  const jobsEnd = new Map<string, number>();
  activities.callParticipant = async (call) => {
    const now = replay.now;
    const match = { match: true, sourceCount: 0, targetCount: 0 };
    if (call.method === 'POST' && options.verifyAtOnce && call.body.step === 'verify')
      return { ok: true, value: { status: 200, body: match } };
    if (call.method === 'POST') {
      const job = `${call.participantUrl}/jobs/${call.body.step}-${call.body.stepAttempt ?? call.body.attempt}`;
      if (!jobsEnd.has(job)) jobsEnd.set(job, now + (call.body.step === 'bulkCopy' ? copyMs : 1000));
      return { ok: true, value: { status: 202, body: null, location: job } };
    }
    const end = jobsEnd.get(call.url) ?? 0;
    const done = call.url.includes('/jobs/verify-') ? match : null;
    return { ok: true, value: now >= end ? { status: 200, body: done } : { status: 202, body: null } };
  };
  const replay: DurableReplay = new DurableReplay({
    orchestrator: migrationOrchestrator,
    name: 'migrationOrchestrator',
    instanceId: input.instanceId,
    input,
    start: START,
    activity: (fn, activityInput) => runActivity(fn, activityInput, replay.now),
  });
  const result = await replay.run();
  const count = (kind: string) => result.actions.filter((a) => a.kind === kind).length;
  const httpCalls = result.actions.filter((a) => a.name === 'migrationCallParticipant').length;
  const [activitiesScheduled, timers] = [count('activity') - httpCalls, count('timer')];
  return {
    profile: options.profile,
    participants: options.participants,
    activities: activitiesScheduled,
    timers,
    httpCalls,
    renewals: result.actions.filter((a) => a.name === 'migrationRenew').length,
    announces: result.actions.filter((a) => a.name === 'migrationAnnounce').length,
    subOrchestrations: 0,
    externalEvents: 0,
    episodes: result.runs,
    workItems: result.runs + activitiesScheduled + httpCalls,
    schedulerActions: 1 + 2 * (activitiesScheduled + httpCalls) + timers,
    status: (result.output as MigrationStatus).status,
  };
}

/**
 * The cases the operators' guide quotes: 0, 1 and 2 participants under each serving profile, as the
 * profile runs them (`env` adds settings to every case).
 */
export async function measureAll(env?: Record<string, string>): Promise<WorkItemCount[]> {
  const rows: WorkItemCount[] = [];
  for (const profile of ['dev', 'production'] as const)
    for (const participants of [0, 1, 2])
      rows.push(await countWorkItems({ profile, participants, ...(env ? { env } : {}) }));
  return rows;
}

/**
 * The same cases under announced locks: the only difference is the flag, so the two tables' difference
 * is what announcing costs (the announce activity, the hold's renewals and waits, no hard-delete escalation).
 */
export const measureAnnounced = (): Promise<WorkItemCount[]> =>
  measureAll({ ROUTELOCK_ANNOUNCED_LOCKS: 'true' });

export function table(rows: WorkItemCount[]): string {
  const head =
    '| profile | participants | activities | timers | HTTP calls | episodes | work items | DTS actions |';
  const line = '|---|---:|---:|---:|---:|---:|---:|---:|';
  const body = rows.map(
    (r) =>
      `| ${r.profile} | ${r.participants} | ${r.activities} | ${r.timers} | ${r.httpCalls} | ${r.episodes} | ${r.workItems} | ${r.schedulerActions} |`,
  );
  return [head, line, ...body].join('\n');
}

async function main(): Promise<void> {
  const [plain, announced] = [await measureAll(), await measureAnnounced()];
  process.stdout.write(
    `${table(plain)}\n\nUnder announced locks (ROUTELOCK_ANNOUNCED_LOCKS=true):\n\n${table(announced)}\n`,
  );
}

if (require.main === module) void main();
