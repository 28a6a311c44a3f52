import { join } from 'node:path';
import { type CopyJobRequest } from '../../examples/message-store/service';
import { MessageStore } from '../../examples/message-store/service';
import { type AzuriteStorage, startAzuriteStorage } from '../support/azurite';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';
import { type FunctionsHost, explained, freePort, json, startHost, watchMigration } from './host';

/**
 * A host killed mid-migration and started again, on the real Durable extension: SIGKILL to the WebJobs host
 * and the worker (what a crashed VM does), during the bulk copy and inside the write lock. What outlives
 * the kill is what outlives a host in Azure: the task hub (an Azurite on disk this file owns, passed as
 * ROUTELOCK_FUNCTIONS_STORAGE), the routing store (the same SQLite file, its key ring beside it), the task
 * hub's name, and the participant (an example message store in this process). The restarted orchestration
 * carries on with its own lock (docs/design.md §6: the lock belongs to the migration, not to a process),
 * so it swaps once and the participant loses nothing. A failure prints the orchestration's history.
 * The messages the killed host had dequeued stay hidden for the Durable queues' visibility timeouts:
 * start:functions gives them production's 1 min (5 min by the extension's default, past the dev
 * hard-delete lease of 120 s: the attempt would fail LockExpired; docs/operators.md, the killRestart
 * bullet).
 */

jest.setTimeout(420_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
/** Long enough to be inside the copy when the kill lands; the job runs on in the participant meanwhile. */
const SLOW_COPY_MS = 6_000;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids start:functions printed ("… started (pid N)"), by name. */
function childPids(host: FunctionsHost): Record<string, number> {
  return Object.fromEntries(
    [...host.output().matchAll(/start:functions: (.+?) started \(pid (\d+)\)/g)].map((m) => [
      String(m[1]),
      Number(m[2]),
    ]),
  );
}

describe('SIGKILL of the host mid-migration, then a restart with the same settings', () => {
  let azurite: AzuriteStorage;
  let store: MessageStore;
  let host: FunctionsHost | undefined;
  let settings: Record<string, string>;
  const instances: string[] = [];
  /** Resource id → the copy step to slow down once (the step the kill lands in), and when it started. */
  const slowOnce = new Map<string, { step: string; startedAt?: number }>();

  beforeAll(async () => {
    azurite = await startAzuriteStorage(scratchDir('azurite-'));
    const dir = scratchDir('participant-');
    store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      copyDelayMs: (job: CopyJobRequest) => {
        const slow = slowOnce.get(job.resourceId);
        if (slow?.step !== job.step || slow.startedAt !== undefined) return 200;
        slow.startedAt = Date.now();
        return SLOW_COPY_MS;
      },
    });
    await store.listen();
    settings = {
      PORT: String(await freePort()),
      ROUTELOCK_SQLITE_PATH: join(scratchDir('data-'), 'routelock.db'),
      ROUTELOCK_TASK_HUB: `fnkill${Date.now().toString(36)}`,
      ROUTELOCK_FUNCTIONS_STORAGE: azurite.connectionString,
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    };
    host = await start();
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
    await store?.close();
    await azurite?.close();
  });

  async function start(): Promise<FunctionsHost> {
    const started = await startHost(settings);
    store.useRouting(started.api);
    process.stdout.write(`functionsHost/killRestart: host listening after ${started.startedMs} ms\n`);
    return started;
  }

  const api = () => host?.api ?? '';

  /** SIGKILL the WebJobs host and the worker together; start:functions stops and leaves nothing behind. */
  async function kill(): Promise<void> {
    const killed = host;
    if (killed === undefined) throw new Error('no host to kill');
    const pids = childPids(killed);
    expect(Object.keys(pids).sort()).toEqual(['webjobs host', 'worker']); // its storage is not its own
    for (const pid of Object.values(pids)) process.kill(pid, 'SIGKILL');
    expect(await killed.exited).toBe(1);
    expect(killed.output()).toMatch(/PROCESS_EXITED: (webjobs host|worker) exited \(SIGKILL\)/);
    expect(Object.values(pids).filter(alive)).toEqual([]);
    expect(alive(azurite.pid)).toBe(true);
    host = undefined;
  }

  async function route(id: string, messages: number): Promise<void> {
    const put = await json(`${api()}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
    for (let i = 1; i <= messages; i += 1)
      store.stores.get('westeurope')?.put(id, `msg-${i}`, `before the migration ${i}`, i);
  }

  async function startMigration(id: string): Promise<string> {
    const started = await json(`${api()}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId: id, target: TO }),
    });
    expect(started.status).toBe(202);
    instances.push(String(started.body.instanceId));
    return String(started.body.migrationId);
  }

  /**
   * After the restart: the migration ends Completed with exactly one swap in the audit ledger (one record
   * per document version that swapped, written by the swap itself), the route at the target with no lock,
   * and every message the participant accepted at the source is at the target as it was written.
   */
  async function completesOnce(id: string, migrationId: string, expected: Map<string, string>) {
    const running = host;
    if (running === undefined) throw new Error('no host');
    await explained(
      running,
      () => instances.slice(-1),
      async () => {
        // the lock the dead process left is the migration's own: the restart finds it, not a rival's
        const left = await json(`${running.api}/routes/${id}`);
        const lock = left.body.lock as { migrationId?: string } | null;
        if (lock !== null) expect(lock.migrationId).toBe(migrationId);
        const verified = store.counters.verifications;
        const began = Date.now();
        const { body, phases } = await watchMigration(running, migrationId, undefined, 300_000);
        const attempts = (body.attempts as { outcome: string; code?: string }[] | undefined) ?? [];
        process.stdout.write(
          `functionsHost/killRestart: ${id} ${String(body.status)} ${Date.now() - began} ms after the restart; phases seen ${phases.join(' → ')}; attempts ${JSON.stringify(attempts)}\n`,
        );
        expect(body.status).toBe('Completed');
        // the restart carries on with the migration's lock; only a lease that lapsed while no host ran may
        // have cost an attempt (a transient LockExpired, docs/design.md §6 step 8), never a Conflict
        expect(attempts.map((a) => a.outcome)).toEqual([
          ...attempts.slice(0, -1).map(() => 'Failed'),
          'Completed',
        ]);
        expect(attempts.slice(0, -1).map((a) => a.code)).toEqual(
          attempts.slice(0, -1).map(() => 'LockExpired'),
        );
        const audit = await json(`${running.api}/routes/${id}/audit`);
        const records = audit.body.items as { op: string; migrationId: string | null }[];
        expect(records.filter((r) => r.op === 'swap')).toEqual([
          expect.objectContaining({ migrationId, from: FROM, to: TO }),
        ]);
        expect(records.map((r) => r.op)).not.toContain('reclaim');
        const after = await json(`${running.api}/routes/${id}`);
        expect(after.body.location).toEqual(TO);
        expect(after.body.lock).toBeNull();
        const target = store.stores.get('eastus')?.list(id) ?? [];
        expect(
          Object.fromEntries(target.filter((m) => !m.deleted).map((m) => [m.messageId, m.text])),
        ).toEqual(Object.fromEntries(expected));
        // the participant's own check (verify, under the write lock) ran after the restart and matched
        expect(store.counters.verifications).toBeGreaterThan(verified);
        expect(store.counters.mismatches).toBe(0);
      },
    );
  }

  test('killed during the bulk copy: the restarted migration swaps once and nothing is lost', async () => {
    const id = `kill-bulk-${Date.now()}`;
    slowOnce.set(id, { step: 'bulkCopy' });
    await route(id, 3);
    const migrationId = await startMigration(id);
    await poll(
      () => slowOnce.get(id)?.startedAt,
      (at) => at !== undefined,
      60_000,
    );
    // a write during the bulk copy (the hard-delete lock lets writes through): only the delta carries it
    expect(await store.write('westeurope', id, 'msg-during-bulk', 'written during the bulk copy')).toEqual({
      status: 'ok',
    });
    const locked = await json(`${api()}/routes/${id}`);
    expect(locked.body.lock).toMatchObject({ migrationId, phase: 'hardDelete' });
    expect((await json(`${api()}/migrations/${encodeURIComponent(migrationId)}`)).body.phase).toBe(
      'hardDelete',
    );
    await kill();
    host = await start();
    const expected = new Map([
      ['msg-1', 'before the migration 1'],
      ['msg-2', 'before the migration 2'],
      ['msg-3', 'before the migration 3'],
      ['msg-during-bulk', 'written during the bulk copy'],
    ]);
    await completesOnce(id, migrationId, expected);
  });

  test('killed inside the write lock, during the delta copy: the restarted migration swaps once', async () => {
    const id = `kill-write-${Date.now()}`;
    slowOnce.set(id, { step: 'deltaCopy' });
    await route(id, 3);
    const migrationId = await startMigration(id);
    await poll(
      () => slowOnce.get(id)?.startedAt,
      (at) => at !== undefined,
      90_000,
    );
    const locked = await json(`${api()}/routes/${id}`);
    expect(locked.body.lock).toMatchObject({ migrationId, phase: 'write' });
    expect(locked.body.enforcement).toMatchObject({ write: 'deny' });
    expect((await json(`${api()}/migrations/${encodeURIComponent(migrationId)}`)).body.phase).toBe('write');
    await kill();
    host = await start();
    const expected = new Map([1, 2, 3].map((i) => [`msg-${i}`, `before the migration ${i}`]));
    await completesOnce(id, migrationId, expected);
  });
});
