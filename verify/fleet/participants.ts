import { createHash } from 'node:crypto';
import type { HttpCall, HttpResult, ParticipantRequest, VerifyAnswer } from '../../shared/migration/types';
import { parseJobRequest } from '../../shared/core/participantWire';
import type { Job } from '../../shared/participant/jobTable';
import { JobBook } from '../../shared/participant/jobBook';
import {
  DEFAULT_FORGET_ENDED_AFTER_SECONDS,
  DEFAULT_RETAIN_OLDER_JOBS_SECONDS,
} from '../../shared/participant/options';
import { controlsWithoutVerify } from './controls';
import { type Fleet, note, regionData } from './state';
import { type Item, type Shelf, between, locationKey, logBetween, pick } from './world';

/**
 * The participants' bookkeeping: the job table of `@routelock/participant` (its pure rules: identity,
 * re-POSTs, a failed job run again, supersession by (lockAcquiredAt, sequence); its retentions the SDK's
 * defaults, on the fleet's clock), each job's answer, where each bulk copy began.
 */
export interface ParticipantState {
  jobs: JobBook;
  /** The answer of each job's current run, by job id: a re-POST while it runs or once done gets it. */
  answers: Map<string, Promise<HttpResult>>;
  bulkStartedAt: Map<string, number>;
  copies: number;
  /** `verify` answered, those that found a mismatch, and items the delta controls dropped. */
  verifications: number;
  mismatches: number;
  itemsDropped: number;
}

export const newParticipantState = (clock: { now(): number }): ParticipantState => ({
  jobs: new JobBook({
    retainOlderMs: DEFAULT_RETAIN_OLDER_JOBS_SECONDS * 1000,
    forgetEndedAfterMs: DEFAULT_FORGET_ENDED_AFTER_SECONDS * 1000,
    clock: () => clock.now(),
  }),
  answers: new Map(),
  bulkStartedAt: new Map(),
  copies: 0,
  verifications: 0,
  mismatches: 0,
  itemsDropped: 0,
});

/** A job as the notes name it: (migrationId, migrationAttempt, step, stepAttempt). */
const jobName = (body: ParticipantRequest): string =>
  `${body.migrationId}/${body.migrationAttempt ?? 1}/${body.step}/${body.stepAttempt ?? body.attempt}`;

/** A participant copying one resource's data between regions, as a real data service would. */
async function copy(f: Fleet, body: ParticipantRequest, started: Job): Promise<HttpResult> {
  const { random, clock } = f;
  const p = f.participants;
  const source = regionData(f, body.from);
  const target = regionData(f, body.to);
  const job = jobName(body);
  // Each migration attempt (a retry with a fresh lock) copies afresh: its own bulk copy, its own deltas.
  const run = `${body.migrationId}/${body.migrationAttempt ?? 1}`;
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
  // A newer job for the resource superseded this one (a delta attempt that overran, an older migration's
  // copy): a copy that finishes later must not land on a target that may be live.
  if (!p.jobs.mayApply(started.id, started.run) && f.control !== 'participantIgnoresSupersede') {
    note(f, body.resourceId, `${job} superseded: not applied`);
    return { status: 409, body: 'superseded' };
  }
  if (body.step === 'deltaCopy') dropOneItem(f, body, snapshot, target.shelf(body.resourceId));
  target.upsert(body.resourceId, snapshot);
  p.copies += 1;
  note(f, body.resourceId, `${job} done (${snapshot.size} items)`);
  return { status: 200, body: { copied: snapshot.size } };
}

/** The share of delta copies the delta controls make drop an item (when one would matter). */
const DELTA_DROP_SHARE = 0.25;

/**
 * The delta controls' bug (deltaDropsItem, deltaDropsItemUnverified): now and then the delta leaves out
 * one item it should carry, one the target does not already hold as the source does (so it matters).
 */
function dropOneItem(f: Fleet, body: ParticipantRequest, snapshot: Map<string, Item>, target: Shelf): void {
  if (f.control !== 'deltaDropsItem' && f.control !== 'deltaDropsItemUnverified') return;
  if (f.random() >= DELTA_DROP_SHARE) return;
  const mattering = [...snapshot].filter(
    ([id, item]) => (target.items.get(id)?.tombstone ?? true) !== item.tombstone,
  );
  if (mattering.length === 0) return;
  const [id] = pick(f.random, mattering);
  snapshot.delete(id);
  f.participants.itemsDropped += 1;
  note(f, body.resourceId, `control: the delta drops ${id}`);
}

/** One region's live items of a resource, sorted, with their digest: what a copy leaves (tombstones count as absent). */
function holding(shelf: Shelf): { count: number; digest: string; live: Set<string> } {
  const live = [...shelf.live].sort();
  return {
    count: live.length,
    digest: `sha256:${createHash('sha256').update(live.join('\n')).digest('hex')}`,
    live: new Set(live),
  };
}

/**
 * `verify` (docs/design.md §6.5), as a data service answers it under the write lock: the resource's live
 * items at the source against the target's, now (a write lock that lapsed meanwhile shows as a mismatch too).
 * Some controls' participants do not implement it (controlsWithoutVerify).
 */
async function verifyResource(f: Fleet, body: ParticipantRequest): Promise<HttpResult> {
  if (controlsWithoutVerify.has(f.control)) return { status: 404, body: 'verify is not implemented' };
  await f.scheduler.timer(f.clock.now() + Math.round(logBetween(f.random, 1, 10) * 1000)).promise;
  const source = holding(regionData(f, body.from).shelf(body.resourceId));
  const target = holding(regionData(f, body.to).shelf(body.resourceId));
  const match = source.count === target.count && source.digest === target.digest;
  const answer: VerifyAnswer = {
    match,
    sourceCount: source.count,
    targetCount: target.count,
    digest: target.digest,
  };
  f.participants.verifications += 1;
  if (!match) {
    f.participants.mismatches += 1;
    const missing = [...source.live].filter((id) => !target.live.has(id));
    const extra = [...target.live].filter((id) => !source.live.has(id));
    answer.detail = `${missing.length} missing at the target${missing[0] ? ` (first ${missing[0]})` : ''}, ${extra.length} only at the target`;
  }
  note(
    f,
    body.resourceId,
    `verify ${body.migrationId}/${body.migrationAttempt ?? 1}/${body.stepAttempt ?? body.attempt}: ${match ? 'match' : `mismatch: ${answer.detail}`}`,
  );
  return { status: 200, body: answer };
}

/**
 * An end notice (docs/design.md §6.11): on `completed`, the source's copy is deleted once
 * `cleanUpSourceAfter` has come (the retired-source window's end), as a real participant reclaims the space;
 * `failed` and `cancelled` are acknowledged (the target's partial copy is replaced by the next bulk copy
 * anyway). Trusting the notice is the point: the workflow sends `completed` only for a swap a replica showed.
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
  // A read, answered afresh each time it is asked (a re-verify after a re-copied delta sees the new data).
  if (call.body.step === 'verify') return verifyResource(f, call.body);
  if (endSteps.has(call.body.step)) return endNotice(f, call.body);
  const parsed = parseJobRequest(call.body);
  if (!parsed.ok) return Promise.resolve({ status: 400, body: parsed.error });
  const p = f.participants;
  const decision = p.jobs.post(parsed.value);
  switch (decision.kind) {
    // Any other step but the copies: not implemented, never a copy.
    case 'notImplemented':
      return Promise.resolve({ status: 404, body: `step ${decision.step} is not implemented` });
    case 'older':
      return Promise.resolve({ status: 409, body: 'an older job than one already seen' });
    case 'running':
    case 'done':
      return p.answers.get(decision.job.id) as Promise<HttpResult>;
    case 'start': {
      const { job } = decision;
      const answer = copy(f, call.body, job).then((result) => {
        // a failed job (5xx) runs again when asked again; a superseded one's ending changes nothing
        p.jobs.finish(
          job.id,
          job.run,
          result.status === 200 ? { ok: true } : { ok: false, error: String(result.body) },
        );
        return result;
      });
      p.answers.set(job.id, answer);
      return answer;
    }
  }
}
