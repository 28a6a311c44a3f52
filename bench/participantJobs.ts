import type { JobRequest } from '../shared/core/participantWire';
import { JobBook } from '../shared/participant/jobBook';
import { MAX_OLDER_JOBS } from '../shared/participant/jobTable';
import { copiedFinish, copiedPost, copiedTableOf } from './handWritten/copiedJobTable';
import { heapMiB, settleGc, table } from './lib';

/**
 * The participant SDK's job table at scale: POSTs per second with 1,000 and 100,000 resources already in
 * it, side by side with the first table (bench/handWritten/copiedJobTable.ts, which copied its Maps on
 * every transition). Each POST is a new delta job for an existing resource, superseding its running one,
 * and the run's ending: the work of a real POST without the HTTP. The resources are visited in a
 * scattered order, so the cache does not flatter the larger table. Every resource's record is full
 * before the timing (its newest job and MAX_OLDER_JOBS outranked ones, none past its retention): the
 * worst case, for the speed and for the heap, measured after a GC (`npm run bench` runs with --expose-gc).
 */

const LOCK = Date.parse('2026-12-01T10:00:00Z');
const HOUR = 3600_000;

const request = (resourceId: string, n: number): JobRequest => ({
  migrationId: 'm-1',
  resourceId,
  from: { region: 'westeurope' },
  to: { region: 'eastus' },
  step: n === 0 ? 'bulkCopy' : 'deltaCopy',
  migrationAttempt: 1,
  stepAttempt: Math.max(1, n),
  sequence: 1 + 2 * n,
  lockAcquiredAt: LOCK,
});

/** The resource the k-th POST goes to: a stride prime to the size scatters them. */
const scattered = (k: number, size: number) => (k * 7919) % size;

/** Seconds a loop of `ops` iterations takes. */
function seconds(ops: number, body: (k: number) => void): number {
  const started = process.hrtime.bigint();
  for (let k = 0; k < ops; k += 1) body(k);
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function sdkRow(size: number, ops: number) {
  const now = { t: LOCK };
  await settleGc();
  const before = heapMiB();
  const book = new JobBook({ retainOlderMs: HOUR, forgetEndedAfterMs: 24 * HOUR, clock: () => now.t });
  const next = new Uint32Array(size);
  const post = (i: number) => {
    const d = book.post(request(`r-${i}`, next[i] as number));
    next[i] = (next[i] as number) + 1;
    if (d.kind === 'start') book.finish(d.job.id, d.job.run, { ok: true });
  };
  // each resource at the most a record holds (the newest and MAX_OLDER_JOBS outranked): the worst case
  for (let round = 0; round <= MAX_OLDER_JOBS; round += 1) for (let i = 0; i < size; i += 1) post(i);
  await settleGc();
  const heap = heapMiB() - before;
  post(0); // warm
  const s = seconds(ops, (k) => post(scattered(k, size)));
  return { postsPerSecond: ops / s, heapMiB: Math.round(heap * 10) / 10, jobs: book.size.jobs };
}

function copiedRow(size: number, ops: number) {
  const next = new Uint32Array(size).fill(1);
  let t = copiedTableOf(Array.from({ length: size }, (_, i) => request(`r-${i}`, 0)));
  const s = seconds(ops, (k) => {
    const i = scattered(k, size);
    const posted = copiedPost(t, request(`r-${i}`, next[i] as number));
    next[i] = (next[i] as number) + 1;
    t = posted.id === undefined ? posted.table : copiedFinish(posted.table, posted.id);
  });
  return { postsPerSecond: ops / s, jobs: t.jobs.size };
}

export async function runParticipantJobs(options: { sizes: number[]; ops: number; copiedWork: number }) {
  const rows = [];
  for (const resources of options.sizes) {
    const sdk = await sdkRow(resources, options.ops);
    // the first table copies every job on each POST: as many POSTs as keep its row to seconds
    const copiedOps = Math.max(5, Math.min(options.ops, Math.floor(options.copiedWork / resources)));
    const copied = copiedRow(resources, copiedOps);
    rows.push({ resources, sdk, copied, copiedOps });
  }
  const text = table(
    [
      'resources',
      'SDK POSTs/s',
      'µs/POST',
      'first table POSTs/s',
      'µs/POST',
      'ratio',
      'SDK heap MiB',
      'B/resource',
    ],
    rows.map((r) => [
      r.resources,
      Math.round(r.sdk.postsPerSecond),
      1e6 / r.sdk.postsPerSecond,
      Math.round(r.copied.postsPerSecond),
      1e6 / r.copied.postsPerSecond,
      r.sdk.postsPerSecond / r.copied.postsPerSecond,
      r.sdk.heapMiB,
      Math.round((r.sdk.heapMiB * 2 ** 20) / r.resources),
    ]),
  );
  return { table: text, data: { ops: options.ops, rows } };
}
