import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Smoke test of `npm run bench`: every benchmark runs at a tiny size and writes its JSON. Speed is
 * measured by the benchmarks, never asserted here.
 */
test('every benchmark runs and writes bench/results-style JSON', async () => {
  const out = mkdtempSync(join(tmpdir(), 'routelock-bench-'));
  try {
    const root = join(__dirname, '..');
    await new Promise<void>((resolve, reject) =>
      execFile(
        process.execPath,
        ['-r', join(root, 'scripts/ts-register.js'), join(root, 'bench/run.ts'), '--tiny', '--out', out],
        { cwd: root, timeout: 120_000 },
        (error, _stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve()),
      ),
    );
    const read = (name: string) =>
      JSON.parse(readFileSync(join(out, `${name}.json`), 'utf8')) as {
        name: string;
        machine: { cores: number };
        table: string;
        data: Record<string, unknown>;
      };
    const readPath = read('read-path');
    expect(readPath.machine.cores).toBeGreaterThan(0);
    expect((readPath.data.rows as unknown[]).length).toBe(5);
    expect(readPath.table).toContain('bare lru-cache get');
    expect(read('http').data).toMatchObject({ summary: { host: { requestsPerSecond: expect.any(Number) } } });
    expect(read('migration').data).toMatchObject({
      withSaving: { readsPerMigration: expect.any(Number) },
      without: { readsPerMigration: expect.any(Number) },
    });
    expect((read('growth').data.rows as unknown[]).length).toBe(1);
    type CampaignRow = { status: string; peakRunning: { limit: number; members: number } };
    const campaign = read('campaign').data as { embedded: CampaignRow[]; virtual: CampaignRow[] };
    expect([...campaign.embedded, ...campaign.virtual].map((r) => r.status)).toEqual([
      'Completed',
      'Completed',
      'Completed',
      'Completed',
    ]);
    for (const r of [...campaign.embedded, ...campaign.virtual])
      expect(r.peakRunning.members).toBeLessThanOrEqual(r.peakRunning.limit);
    type AnnouncedRun = { rule: string; hold: { writeRegionReads: number } };
    const announcedReads = read('announced-reads').data as { library: AnnouncedRun[] };
    expect(announcedReads.library.map((r) => [r.rule, r.hold.writeRegionReads > 0])).toEqual([
      ['legacy', true],
      ['announced', false],
    ]);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}, 150_000);
