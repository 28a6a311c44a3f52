import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { CampaignPreflightReport } from '../../shared/campaign/types';

/**
 * The campaign dry run at its request bound (docs/design.md §6.2): 1,000 resources on the embedded host
 * (SQLite file, real HTTP), by ids and by a `from` selection. Reads only, so it answers well within a
 * request's time; the figures are printed for the report.
 */

const N = 1000;
let host: LocalHost;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cdry-scale-'));
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'state.db') },
    log: () => undefined,
  });
  for (let i = 0; i < N; i += 1)
    await host.services.router.createRoute(`scale-${i}`, { region: 'westeurope' });
}, 60_000);

afterAll(async () => {
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function timedDryRun(
  body: Record<string, unknown>,
): Promise<{ ms: number; report: CampaignPreflightReport }> {
  const started = performance.now();
  const res = await fetch(`${host.url}/api/campaigns`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, target: { region: 'eastus' }, dryRun: true }),
  });
  const report = (await res.json()) as CampaignPreflightReport;
  expect(res.status).toBe(200);
  return { ms: performance.now() - started, report };
}

test(`${N} resources by ids and by a from selection: every one checked, in well under the request timeout`, async () => {
  const ids = Array.from({ length: N }, (_, i) => `scale-${i}`);
  await timedDryRun({ resources: ids.slice(0, 10) }); // warm: the first request compiles the handler's paths
  const byIds = await timedDryRun({ resources: ids, maxConcurrent: 50, startsPerMinute: 100 });
  expect(byIds.report).toMatchObject({ ok: true, resourceCount: N, wouldStart: N });
  expect(byIds.report.estimate).toMatchObject({ migrations: N, waves: 20, limitedBy: 'startsPerMinute' });
  const byRegion = await timedDryRun({ from: { region: 'westeurope' } });
  expect(byRegion.report).toMatchObject({ ok: true, resourceCount: N, wouldStart: N });
  process.stderr.write(
    `campaign dry run of ${N} resources on the embedded host: ids ${byIds.ms.toFixed(0)} ms, from ${byRegion.ms.toFixed(0)} ms\n`,
  );
  expect(byIds.ms).toBeLessThan(10_000);
  expect(byRegion.ms).toBeLessThan(10_000);
}, 60_000);
