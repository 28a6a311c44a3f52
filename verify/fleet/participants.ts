import type { HttpCall, HttpResult, ParticipantRequest } from '../../shared/migration/types';
import { type Fleet, note, regionData } from './state';
import { type Item, between, locationKey, logBetween } from './world';

/** The participants' bookkeeping: jobs by attempt, where each bulk copy began, the newest job. */
export interface ParticipantState {
  jobs: Map<string, Promise<HttpResult>>;
  bulkStartedAt: Map<string, number>;
  currentCopy: Map<string, string>;
  copies: number;
}

export const newParticipantState = (): ParticipantState => ({
  jobs: new Map(),
  bulkStartedAt: new Map(),
  currentCopy: new Map(),
  copies: 0,
});

/** A job (docs/design.md §6.5): (migrationId, migrationAttempt, step, stepAttempt). */
const jobKey = (body: ParticipantRequest): string =>
  `${body.migrationId}/${body.migrationAttempt ?? 1}/${body.step}/${body.stepAttempt ?? body.attempt}`;

/** A participant copying one resource's data between regions, as a real data service would. */
async function copy(f: Fleet, body: ParticipantRequest): Promise<HttpResult> {
  const { random, clock } = f;
  const p = f.participants;
  const source = regionData(f, body.from);
  const target = regionData(f, body.to);
  // The newest job for a resource supersedes every older one (a delta attempt that overran, an older
  // migration's copy): an older job that finishes later must not land on a target that may be live.
  const job = jobKey(body);
  // Each migration attempt (a retry with a fresh lock) copies afresh: its own bulk copy, its own deltas.
  const run = `${body.migrationId}/${body.migrationAttempt ?? 1}`;
  p.currentCopy.set(body.resourceId, job);
  let snapshot: Map<string, Item>;
  if (body.step === 'bulkCopy') {
    p.bulkStartedAt.set(run, source.current);
    target.shelf(body.resourceId).clear();
    snapshot = source.snapshot(body.resourceId);
  } else {
    const since = p.bulkStartedAt.get(run) ?? 0;
    snapshot = source.snapshot(body.resourceId, since);
  }
  const seconds =
    body.step === 'bulkCopy'
      ? logBetween(random, 600, 3 * 3600)
      : random() < 0.1
        ? between(random, 960, 1500) // overruns the write budget
        : logBetween(random, 10, 600);
  await f.scheduler.timer(clock.now() + Math.round(seconds * 1000)).promise;
  if (random() < 0.02) return { status: 503, body: 'participant busy' };
  if (p.currentCopy.get(body.resourceId) !== job) {
    note(f, body.resourceId, `${job} superseded: not applied`);
    return { status: 409, body: 'superseded' };
  }
  target.upsert(body.resourceId, snapshot);
  p.copies += 1;
  note(f, body.resourceId, `${job} done (${snapshot.size} items)`);
  return { status: 200, body: { copied: snapshot.size } };
}

/**
 * An end notice (issue 19 §4): on `completed`, the source's copy is deleted once `cleanUpSourceAfter`
 * has come (the retired-source window's end), as a real participant reclaims the space; `failed` and
 * `cancelled` are acknowledged (the target's partial copy is replaced by the next bulk copy anyway).
 * Trusting the notice is the point: the workflow sends `completed` only for a swap a replica showed.
 */
function endNotice(f: Fleet, body: ParticipantRequest): Promise<HttpResult> {
  if (body.step === 'completed') {
    const at = Math.max(f.clock.now(), Date.parse(body.cleanUpSourceAfter ?? ''));
    void f.scheduler.timer(at).promise.then(() => {
      regionData(f, body.from).shelf(body.resourceId).clear();
      note(f, body.resourceId, `${body.migrationId} source cleaned up at ${locationKey(body.from)}`);
    });
  }
  return Promise.resolve({ status: 200, body: null });
}

const endSteps: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** The participants' HTTP as the runner calls it: one job per attempt, asked again as often as it likes. */
export function participantHttp(f: Fleet, call: HttpCall): Promise<HttpResult> {
  if (endSteps.has(call.body.step)) return endNotice(f, call.body);
  const { jobs } = f.participants;
  const key = jobKey(call.body);
  let job = jobs.get(key);
  if (!job) {
    job = copy(f, call.body).then((result) => {
      if (result.status >= 500) jobs.delete(key); // a failed job runs again when asked again
      return result;
    });
    jobs.set(key, job);
  }
  return job;
}
