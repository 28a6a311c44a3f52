import { TokenKeyring } from '../shared/core/security/tokenKeys';
import { startCosmosServer } from '../testkit/cosmosServer';
import { ManualClock } from '../testkit/clock';
import { type Config, parseConfig } from '../shared/config';
import { type StoredDocument, carriedVersion, newLocationDocument } from '../shared/core/lock/document';
import { createActivities } from '../shared/migration/activities';
import { InProcessRunner } from '../shared/migration/inProcess';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';
import { VirtualScheduler } from '../testkit/virtualScheduler';
import { withoutIfMatch } from '../testkit/withoutIfMatch';
import { migrationSettings, migrationWorkflow } from '../shared/migration/workflow';
import { newMigrationInput } from '../shared/migration/records';
import { assertRouteExists } from '../shared/migration/service';
import type { Activities } from '../shared/migration/activities';
import { type MigrationInput, type MigrationStatus, WORKFLOW_VERSION } from '../shared/migration/types';
import { Router } from '../shared/core/router';
import { type LocationStore, resetCounters } from '../shared/core/store/ports/locations';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { heapMiB, median, settleGc, table } from './lib';

/**
 * Migration cost: store reads and writes per migration with and without the If-Match read saving, and
 * full-lifecycle (lock-only) migrations per second through the in-process runner on a virtual clock,
 * on SQLite and on the Cosmos adapter (@vercel/cosmosdb-server), at several concurrencies.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

async function runMigrations(
  store: LocationStore,
  count: number,
  options: { saving: boolean; config: Config; prefix: string },
) {
  const clock = new ManualClock();
  const scheduler = new VirtualScheduler(clock);
  const router = new Router({ store, timing: options.config.timing, clock: clock.now, cacheMax: count + 10 });
  const state = new SqliteMigrationState(':memory:');
  const keyring = TokenKeyring.ephemeral();
  const base = createActivities(router, options.config.timing, { keyring, records: state });
  const activities = options.saving ? base : withoutIfMatch(base);
  let n = 0;
  const runner = new InProcessRunner({
    activities,
    keyring,
    state,
    scheduler,
    settings: migrationSettings(options.config),
    newId: () => `${options.prefix}-m-${++n}`,
    http: async () => ({ status: 200, body: null }),
  });
  const ids = Array.from({ length: count }, (_, i) => `${options.prefix}-${i}`);
  if (store instanceof SqliteStore) {
    const insert = store.database.transaction(() => {
      const statement = store.database.prepare(
        'INSERT INTO locations (id, etag, doc, updated_at) VALUES (?, ?, ?, ?)',
      );
      for (const id of ids) statement.run(id, `e-${id}`, JSON.stringify(newLocationDocument(id, SOURCE)), 0);
    });
    insert();
  } else {
    for (let i = 0; i < ids.length; i += 50)
      await Promise.all(ids.slice(i, i + 50).map((id) => store.create(newLocationDocument(id, SOURCE))));
  }
  resetCounters(store.counters);
  await settleGc();
  const heapBefore = heapMiB();
  const started = process.hrtime.bigint();
  for (const id of ids) runner.start({ resourceId: id, target: TARGET });
  await scheduler.runWhile(() => runner.activeCount > 0);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const heapAfter = heapMiB();
  const completed = state.recent(count).filter((r) => r.status.status === 'Completed').length;
  const c = store.counters;
  state.close();
  return {
    count,
    completed,
    seconds,
    migrationsPerSecond: count / seconds,
    msPerMigration: (seconds * 1000) / count,
    readsPerMigration: (c.nearestReads + c.writeRegionReads) / count,
    writeRegionReadsPerMigration: c.writeRegionReads / count,
    writesPerMigration: c.replaces / count,
    heapDeltaMiB: Math.round((heapAfter - heapBefore) * 10) / 10,
  };
}

/**
 * One lock-only migration's workflow driven step by step on a virtual clock (the runner's part, without
 * its journal): a Durable or in-process runner performs the same activities in the same order, so the
 * store operations counted are the workflow's. Any workflow version, side by side on one store.
 */
async function driveLockOnly(input: MigrationInput, activities: Activities, clock: ManualClock) {
  const workflow = migrationWorkflow(input);
  let next = workflow.next();
  while (!next.done) {
    const step = next.value;
    let answer: unknown;
    try {
      if (step.kind === 'activity') {
        const run = activities[step.name] as (i: unknown) => Promise<unknown>;
        answer = await run(step.input);
      } else if (step.kind === 'timer') {
        clock.set(Math.max(clock.now(), step.fireAt));
        answer = step.cancellable ? null : undefined;
      } else if (step.kind === 'now') answer = clock.now();
      else if (step.kind === 'cancelRequested') answer = null;
      else if (step.kind !== 'status') throw new Error(`no ${step.kind} step in a lock-only migration`);
    } catch (error) {
      next = workflow.throw(error);
      continue;
    }
    next = workflow.next(answer);
  }
  return next.value;
}

type Start = 'alone' | 'held' | 'start path' | 'start path, ETag passed';

/**
 * Location-document reads (by region) and writes per lock-only migration of the current workflow
 * version, on one SQLite store: `alone`, the routes written by another process (this router holds
 * no version of them); `held`, written through this router (it holds the version the caller's ETag
 * names); `start path`, the start's existence read first (`assertRouteExists`, as POST /migrations and
 * a campaign's member start do), routes written by another process; `start path, ETag passed`, the same
 * with the route's listed copy (document and ETag) passed to the start and the pre-lock, as a campaign
 * that listed it does.
 */
async function routeReads(config: Config, start: Start, count: number) {
  const clock = new ManualClock();
  const store = new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now, cacheMax: count + 10 });
  const writer = new Router({ store, timing: config.timing, clock: clock.now, cacheMax: count + 10 });
  const keyring = TokenKeyring.ephemeral();
  const activities = createActivities(router, config.timing, { keyring });
  const settings = migrationSettings(config);
  const ids = Array.from({ length: count }, (_, i) => `reads-${i}`);
  const listed = new Map<string, StoredDocument>();
  for (const id of ids) {
    const created = await (start === 'held' ? router : writer).createRoute(id, SOURCE);
    listed.set(id, carriedVersion(created.stored));
  }
  resetCounters(store.counters);
  const ended: MigrationStatus[] = [];
  for (const [n, id] of ids.entries()) {
    if (start === 'start path') await assertRouteExists(router, id);
    const known = start === 'start path, ETag passed' ? listed.get(id) : undefined;
    if (known !== undefined) await assertRouteExists(router, id, known);
    const input = newMigrationInput({
      migrationId: `m-${n}`,
      instanceId: `migrate-${id}`,
      resourceId: id,
      target: TARGET,
      settings,
      lock: keyring.newSeed(),
      listed: { copy: known, keyring },
    });
    ended.push(await driveLockOnly(input, activities, clock));
  }
  const c = store.counters;
  const per = (x: number) => Math.round((x / count) * 100) / 100;
  return {
    version: WORKFLOW_VERSION,
    start,
    completed: ended.filter((s) => s.status === 'Completed').length,
    nearestReads: per(c.nearestReads),
    writeRegionReads: per(c.writeRegionReads),
    reads: per(c.nearestReads + c.writeRegionReads),
    writes: per(c.replaces),
  };
}

export async function runRouteReads(count = 100) {
  const config = parseConfig({});
  const rows: Awaited<ReturnType<typeof routeReads>>[] = [];
  for (const start of ['alone', 'held', 'start path', 'start path, ETag passed'] as const)
    rows.push(await routeReads(config, start, count));
  return rows;
}

export async function runMigration(options: { concurrency: number[]; repeats: number; cosmosCount: number }) {
  const config = parseConfig({});
  // The location-document reads per lock-only migration (100 migrations each).
  const reads = await runRouteReads();
  // Reads and writes per migration, with and without the saving (SQLite, 100 migrations each).
  const withSaving = await runMigrations(new SqliteStore(':memory:'), 100, {
    saving: true,
    config,
    prefix: 'cost-a',
  });
  const without = await runMigrations(new SqliteStore(':memory:'), 100, {
    saving: false,
    config,
    prefix: 'cost-b',
  });

  // Throughput at each concurrency, SQLite; the median of the repeats.
  const sqlite: Awaited<ReturnType<typeof runMigrations>>[] = [];
  for (const count of options.concurrency) {
    const runs = [];
    for (let r = 0; r < options.repeats; r += 1) {
      runs.push(
        await runMigrations(new SqliteStore(':memory:'), count, {
          saving: true,
          config,
          prefix: `tp-${count}-${r}`,
        }),
      );
    }
    const best = runs.sort((a, b) => a.migrationsPerSecond - b.migrationsPerSecond)[
      Math.floor(runs.length / 2)
    ] as (typeof runs)[number];
    sqlite.push({ ...best, migrationsPerSecond: median(runs.map((x) => x.migrationsPerSecond)) });
  }

  // The Cosmos adapter against the wire-protocol emulator (HTTPS on loopback).
  const server = await startCosmosServer();
  let cosmos: Awaited<ReturnType<typeof runMigrations>>;
  try {
    cosmos = await runMigrations(await server.connect(), options.cosmosCount, {
      saving: true,
      config,
      prefix: 'cosmos',
    });
  } finally {
    await server.close();
  }

  const readsTable = table(
    [
      'per lock-only migration (workflow version)',
      'route reads',
      'nearest / replica',
      'write region',
      'writes',
      'completed',
    ],
    reads.map((r) => [
      `${r.start}, v${r.version}`,
      r.reads,
      r.nearestReads,
      r.writeRegionReads,
      r.writes,
      r.completed,
    ]),
  );
  const text = [
    readsTable,
    '',
    table(
      ['per lock-only migration (in-process runner, v5)', 'store reads', 'write-region reads', 'writes'],
      [
        [
          'with If-Match (orchestrator passes its ETag)',
          withSaving.readsPerMigration,
          withSaving.writeRegionReadsPerMigration,
          withSaving.writesPerMigration,
        ],
        [
          'without If-Match',
          without.readsPerMigration,
          without.writeRegionReadsPerMigration,
          without.writesPerMigration,
        ],
      ],
    ),
    '',
    table(
      ['store', 'concurrent migrations', 'completed', 'migrations/s', 'ms per migration', 'heap Δ MiB'],
      [
        ...sqlite.map((r) => [
          'SQLite',
          r.count,
          r.completed,
          Math.round(r.migrationsPerSecond),
          r.msPerMigration,
          r.heapDeltaMiB,
        ]),
        [
          'Cosmos (emulator)',
          cosmos.count,
          cosmos.completed,
          Math.round(cosmos.migrationsPerSecond),
          cosmos.msPerMigration,
          cosmos.heapDeltaMiB,
        ],
      ],
    ),
  ].join('\n');
  return { table: text, data: { reads, withSaving, without, sqlite, cosmos } };
}
