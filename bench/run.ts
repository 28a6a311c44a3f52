import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runAnnouncedReads } from './announcedReads';
import { runCampaign } from './campaign';
import { runClient } from './client';
import { runGrowth } from './growth';
import { runHttp } from './http';
import { runInstallSize } from './installSize';
import { type Machine, machine, writeResult } from './lib';
import { runMigration } from './migration';
import { runParticipantJobs } from './participantJobs';
import { runReadPath } from './readPath';
import { runWriteLockHold } from './writeLockHold';

/**
 * `npm run bench` (or `npm run bench -- --quick`): every benchmark, results in bench/results/<name>.json
 * and a printed table. A full run also rewrites bench/README.md with the tables and the command; a
 * full-size `--only <name>` replaces that benchmark's section there and keeps the others.
 * Options: --quick, --only <name>, --out <dir>.
 */

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const only = args.includes('--only') ? args[args.indexOf('--only') + 1] : undefined;
const out = args.includes('--out') ? (args[args.indexOf('--out') + 1] as string) : join(__dirname, 'results');
const tiny = args.includes('--tiny'); // the smoke test: checks they run and write JSON, nothing more

const benchmarks: Record<string, () => Promise<{ table: string; data: unknown }>> = {
  'read-path': () =>
    runReadPath({
      resources: tiny ? 100 : 1000,
      fractions: [0, 0.001, 0.01, 0.1, 1],
      ops: tiny ? 2000 : quick ? 50_000 : 300_000,
      repeats: tiny ? 1 : quick ? 2 : 5,
    }),
  http: () =>
    runHttp(
      tiny
        ? { seconds: 1, warmupSeconds: 1, rounds: 1, connections: 4 }
        : quick
          ? { seconds: 3, warmupSeconds: 1, rounds: 1, connections: 32 }
          : { seconds: 10, warmupSeconds: 2, rounds: 3, connections: 32 },
    ),
  migration: () =>
    runMigration(
      tiny
        ? { concurrency: [1, 5], repeats: 1, cosmosCount: 3 }
        : quick
          ? { concurrency: [1, 10, 100], repeats: 1, cosmosCount: 20 }
          : { concurrency: [1, 10, 100, 1000], repeats: 3, cosmosCount: 100 },
    ),
  growth: () =>
    runGrowth(
      tiny
        ? { sizes: [100], ops: 1000 }
        : quick
          ? { sizes: [1000, 10_000], ops: 50_000 }
          : { sizes: [1000, 10_000, 100_000, 1_000_000], ops: 300_000 },
    ),
  campaign: () =>
    runCampaign(
      tiny
        ? {
            embedded: [
              { members: 20, maxConcurrent: 20 },
              { members: 10, maxConcurrent: 5 },
            ],
            virtual: [
              { members: 20, maxConcurrent: 10, profile: 'production' },
              { members: 200, maxConcurrent: 50, profile: 'dev' },
            ],
          }
        : quick
          ? {
              embedded: [
                { members: 2000, maxConcurrent: 1000 },
                { members: 500, maxConcurrent: 100 },
              ],
              virtual: [
                { members: 200, maxConcurrent: 50, profile: 'production' },
                { members: 10_000, maxConcurrent: 1000, profile: 'dev' },
              ],
            }
          : {
              // The lower limit moves fewer members: its rate is steady after a few waves.
              embedded: [
                { members: 10_000, maxConcurrent: 1000 },
                { members: 2000, maxConcurrent: 100 },
              ],
              // Production timing: a tick every 5 s reads each running member's record, so fewer members.
              // The smaller first: each row's peak RSS is the process's from its start (VmHWM reset).
              virtual: [
                { members: 1000, maxConcurrent: 100, profile: 'production' },
                { members: 100_000, maxConcurrent: 1000, profile: 'dev' },
              ],
            },
    ),
  client: () =>
    runClient(
      tiny
        ? { ops: 20_000, chunk: 10_000, seconds: 1, ids: 5, paceMs: 1 }
        : quick
          ? { ops: 500_000, chunk: 50_000, seconds: 5, ids: 20, paceMs: 1 }
          : { ops: 2_000_000, chunk: 100_000, seconds: 10, ids: 20, paceMs: 1 },
    ),
  'write-lock-hold': () =>
    runWriteLockHold({
      migrations: tiny ? 1 : quick ? 8 : 30,
      rounds: tiny ? 1 : quick ? 2 : 4,
      deltaMs: 100,
      staggerMs: 150,
    }),
  'participant-jobs': () =>
    runParticipantJobs(
      tiny
        ? { sizes: [100, 1000], ops: 1000, copiedWork: 100_000 }
        : quick
          ? { sizes: [1000, 100_000], ops: 50_000, copiedWork: 2_000_000 }
          : { sizes: [1000, 100_000], ops: 300_000, copiedWork: 10_000_000 },
    ),
  // Virtual time: counts and virtual latencies, the same on any machine; only the run's length changes.
  'announced-reads': () =>
    runAnnouncedReads({
      holdSeconds: tiny ? 10 : quick ? 120 : 600,
      httpHoldSeconds: tiny ? 5 : quick ? 60 : 600,
      resolvesPerSecond: 100,
      writeRegionReadMs: 50,
      replicaReadMs: 5,
      writeHoldSeconds: tiny ? 10 : 60,
      ...(tiny ? { afterSwapSeconds: 5 } : {}),
    }),
  // Sizes, not speed: the same at every size (--tiny measures the client alone, to stay short).
  'install-size': () => runInstallSize(tiny ? { folders: ['client'] } : {}),
};

async function main(): Promise<void> {
  const info: Machine = machine();
  const header = `${info.cores} cores (${info.cpu}), ${info.memoryGiB} GiB, Node ${info.node}, ${info.platform}, ${info.date}`;
  process.stdout.write(`routelock benchmarks — ${header}${quick ? ' — quick' : ''}\n\n`);
  const sections: string[] = [];
  for (const [name, run] of Object.entries(benchmarks)) {
    if (only && only !== name) continue;
    const started = Date.now();
    const result = await run();
    const path = writeResult(out, {
      name,
      machine: info,
      quick: quick || tiny,
      table: result.table,
      data: result.data,
    });
    const section = `### ${name}\n\n${result.table}\n`;
    sections.push(section);
    process.stdout.write(`${section}\n(${((Date.now() - started) / 1000).toFixed(1)} s, ${path})\n\n`);
  }
  if (!quick && !tiny && !only) {
    const command = 'npm run bench';
    writeFileSync(
      join(__dirname, 'README.md'),
      `# Benchmarks\n\nProduced by \`${command}\` on ${header}.\nQuick version: \`npm run bench -- --quick\`. Raw results: \`bench/results/*.json\`. What each measures and how: the comments at the top of \`bench/*.ts\`.\n\n${sections.join('\n')}`,
    );
  } else if (!quick && !tiny && only && sections[0]) {
    replaceSection(
      join(__dirname, 'README.md'),
      only,
      `${sections[0]}\n(\`npm run bench -- --only ${only}\` on ${header}.)\n`,
    );
  }
}

/** The README with one benchmark's section (from its heading to the next) replaced, or appended. */
function replaceSection(path: string, name: string, section: string): void {
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Benchmarks\n\n';
  const heading = `### ${name}\n`;
  const at = text.indexOf(heading);
  if (at < 0) {
    writeFileSync(path, `${text.trimEnd()}\n\n${section}`);
    return;
  }
  const next = text.indexOf('\n### ', at + heading.length);
  writeFileSync(path, `${text.slice(0, at)}${section}${next < 0 ? '' : `\n${text.slice(next + 1)}`}`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
