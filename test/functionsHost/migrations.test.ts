import { type CopyJobRequest } from '../../examples/message-store/service';
import { MessageStore } from '../../examples/message-store/service';
import { scratchDir } from '../support/scratch';
import { poll } from '../support/poll';
import { type FunctionsHost, explained, json, startHost, watchMigration } from './host';
import { join } from 'node:path';

/**
 * The product's scenarios on the real Durable extension (hosts/webjobs through `npm run start:functions`),
 * with the example message store as the participant, answering `202` + `Location` at once (it ignores
 * `Prefer: wait`) so the workflow polls it on durable timers: the quick start's four-phase walk-through by
 * hand and through `POST /api/migrations`, a cancel during the bulk copy, and a cancel after the swap. One
 * host for the file: a start costs seconds. A failure prints the orchestration's history.
 */

jest.setTimeout(120_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const SLOW_BULK_MS = 20_000;

describe('scenarios on the real Durable extension, one participant answering 202 + Location', () => {
  let host: FunctionsHost;
  let store: MessageStore;
  const instances: string[] = [];
  const slowCopiesStarted: string[] = [];

  beforeAll(async () => {
    const dir = scratchDir('participant-');
    store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      // a resource named slow-… takes its bulk copy long enough to cancel it while it runs
      copyDelayMs: (job: CopyJobRequest) => {
        if (!job.resourceId.startsWith('slow-') || job.step !== 'bulkCopy') return 200;
        slowCopiesStarted.push(job.resourceId);
        return SLOW_BULK_MS;
      },
    });
    await store.listen();
    host = await startHost({
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    });
    store.useRouting(host.api);
    process.stdout.write(`functionsHost/migrations: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
    await store?.close();
  });

  async function route(id: string) {
    const put = await json(`${host.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
  }

  async function startMigration(id: string): Promise<string> {
    const started = await json(`${host.api}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId: id, target: TO }),
    });
    expect(started.status).toBe(202);
    instances.push(String(started.body.instanceId));
    return String(started.body.migrationId);
  }

  const post = (path: string, body: unknown) =>
    json(`${host.api}${path}`, { method: 'POST', body: JSON.stringify(body) });

  test('the quick start by hand: pre-lock, hard-delete, write lock and swap over HTTP', async () => {
    const id = `hand-${Date.now()}`;
    await route(id);
    const prelock = await post(`/routes/${id}/prelock`, {
      migrationId: `by-hand-${id}`,
      owner: 'me',
      target: TO,
    });
    expect(prelock.status).toBe(200);
    const token = String(prelock.body.token);
    // the convergence delay (3 s in dev timing): escalating sooner is 409 ConvergencePending
    const hardDelete = await poll(
      () => post(`/routes/${id}/escalate`, { token, phase: 'hardDelete' }),
      (answer) => answer.status !== 409,
      10_000,
    );
    expect(hardDelete.status).toBe(200);
    const write = await post(`/routes/${id}/escalate`, { token, phase: 'write' });
    expect(write.status).toBe(200);
    const locked = await json(`${host.api}/routes/${id}`);
    expect(locked.body.enforcement).toMatchObject({ write: 'deny' });
    const swapped = await post(`/routes/${id}/swap`, { token, writeAt: write.body.writeAt });
    expect(swapped.status).toBe(200);
    const after = await json(`${host.api}/routes/${id}`);
    expect(after.body.location).toEqual(TO);
    expect(after.body.lock).toBeNull();
    // westeurope kept as the retired source, so a service still serving from it sends callers on
    expect(after.body.secondary).toMatchObject({ role: 'retiredSource' });
  });

  test('POST /api/migrations walks the four phases, the participant polled, its messages copied', async () => {
    const id = `walk-${Date.now()}`;
    await route(id);
    store.stores.get('westeurope')?.put(id, 'msg-1', 'hello', 1);
    store.stores.get('westeurope')?.put(id, 'msg-2', 'world', 2);
    const polls = store.counters.polls;
    const began = Date.now();
    const migrationId = await startMigration(id);
    await explained(
      host,
      () => instances.slice(-1),
      async () => {
        const { body, phases } = await watchMigration(host, migrationId);
        process.stdout.write(
          `functionsHost/migrations: one-participant migration ${String(body.status)} after ${Date.now() - began} ms; phases seen ${phases.join(' → ')}\n`,
        );
        expect(body.status).toBe('Completed');
        const timeline = body.timeline as Record<string, string | null>;
        const times = ['prelockAt', 'hardDeleteAt', 'writeAt', 'swappedAt'].map((k) =>
          Date.parse(String(timeline[k])),
        );
        expect(times.every(Number.isFinite)).toBe(true);
        expect([...times].sort((a, b) => a - b)).toEqual(times);
        expect(store.counters.polls).toBeGreaterThan(polls);
        expect(
          store.stores
            .get('eastus')
            ?.list(id)
            .map((m) => m.messageId),
        ).toEqual(['msg-1', 'msg-2']);
        const after = await json(`${host.api}/routes/${id}`);
        expect(after.body.location).toEqual(TO);
        expect(after.body.lock).toBeNull();

        // a cancel after the swap is too late: 409, the migration stays Completed
        const late = await post(`/migrations/${encodeURIComponent(migrationId)}/cancel`, {});
        expect(late.status).toBe(409);
        expect(late.body.code).toBe('AlreadySwapped');
        expect((await watchMigration(host, migrationId)).body.status).toBe('Completed');
      },
    );
  });

  test('a cancel during the bulk copy: Cancelled, the route where it was, no lock left', async () => {
    const id = `slow-${Date.now()}`;
    await route(id);
    const migrationId = await startMigration(id);
    await explained(
      host,
      () => instances.slice(-1),
      async () => {
        await poll(
          () => slowCopiesStarted.includes(id),
          (started) => started,
          30_000,
        );
        const began = Date.now();
        const cancel = await post(`/migrations/${encodeURIComponent(migrationId)}/cancel`, {});
        expect(cancel.status).toBe(200);
        const { body } = await watchMigration(host, migrationId);
        process.stdout.write(`functionsHost/migrations: cancel took effect after ${Date.now() - began} ms\n`);
        expect(body.status).toBe('Cancelled');
        expect(body.timeline).toMatchObject({ writeAt: null, swappedAt: null });
        expect(Date.now() - began).toBeLessThan(SLOW_BULK_MS);
        const after = await json(`${host.api}/routes/${id}`);
        expect(after.body.location).toEqual(FROM);
        expect(after.body.lock).toBeNull();
      },
    );
  });
});
