import { enforcement } from '../shared/core/lock/view';
import { prng } from '../testkit/prng';
import { heapMiB, settleGc, table } from './lib';
import { setupReadPath } from './readPath';

/**
 * Growth of the read path: 10^3 to 10^6 resources (1 % of operations on resources with a started lock),
 * routelock against the dedicated lock record: throughput and the heap both need for their caches.
 */
export async function runGrowth(options: { sizes: number[]; ops: number }) {
  const rows: {
    resources: number;
    routelockOpsPerSecond: number;
    baselineOpsPerSecond: number;
    heapMiB: number;
    setupSeconds: number;
  }[] = [];
  for (const resources of options.sizes) {
    await settleGc();
    const before = heapMiB();
    const setupStarted = process.hrtime.bigint();
    const h = await setupReadPath(resources, Math.max(10, Math.ceil(resources / 100)));
    const setupSeconds = Number(process.hrtime.bigint() - setupStarted) / 1e9;
    const random = prng(7);
    const unlocked = h.ids.slice(h.locked.length);
    const ops = Array.from({ length: options.ops }, () =>
      random() < 0.01
        ? (h.locked[Math.floor(random() * h.locked.length)] as string)
        : (unlocked[Math.floor(random() * unlocked.length)] as string),
    );
    const time = async (op: (id: string) => unknown) => {
      for (const id of ops) {
        const r = op(id);
        if (r instanceof Promise) await r;
      }
      const started = process.hrtime.bigint();
      for (const id of ops) {
        const r = op(id);
        if (r instanceof Promise) await r;
      }
      return options.ops / (Number(process.hrtime.bigint() - started) / 1e9);
    };
    const routelock = await time((id) => {
      const cached = h.router.peek(id);
      return cached ? enforcement(cached.doc, h.clock.now(), h.timing) : h.router.resolve(id);
    });
    const baseline = await time((id) => h.baseline.decide(id));
    rows.push({
      resources,
      routelockOpsPerSecond: routelock,
      baselineOpsPerSecond: baseline,
      heapMiB: Math.round((heapMiB() - before) * 10) / 10,
      setupSeconds,
    });
    await h.store.close();
  }
  const text = table(
    [
      'resources',
      'routelock ops/s (f = 1 %)',
      'dedicated lock record ops/s',
      'ratio',
      'heap for both MiB',
      'setup s',
    ],
    rows.map((r) => [
      r.resources,
      Math.round(r.routelockOpsPerSecond),
      Math.round(r.baselineOpsPerSecond),
      r.routelockOpsPerSecond / r.baselineOpsPerSecond,
      r.heapMiB,
      r.setupSeconds,
    ]),
  );
  return { table: text, data: { ops: options.ops, rows } };
}
