import { join } from 'node:path';
import { MessageStore } from '../../examples/message-store/service';
import { scratchDir } from '../support/scratch';
import { type FunctionsHost, explained, json, startHost, watchMigration } from './host';

/**
 * Two participants answering `202` + `Location` (two example message stores, each ignoring `Prefer: wait`
 * so the workflow polls both on durable timers) on the real Durable extension: the migration completes
 * once both copied, and each store holds its messages at the target. Its own host: the participants are
 * the host's settings.
 */

jest.setTimeout(120_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };

describe('two participants answering 202 + Location on the real Durable extension', () => {
  let host: FunctionsHost;
  const stores: MessageStore[] = [];
  const instances: string[] = [];

  beforeAll(async () => {
    for (const name of ['a', 'b']) {
      const dir = scratchDir(`participant-${name}-`);
      const store = new MessageStore({
        regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
        honoursPreferWait: false,
        copyDelayMs: 300,
      });
      await store.listen();
      stores.push(store);
    }
    host = await startHost({
      ROUTELOCK_PARTICIPANTS: JSON.stringify(
        stores.map((s, i) => ({ name: `messages${i + 1}`, url: `${s.url}/migrate` })),
      ),
    });
    for (const store of stores) store.useRouting(host.api);
    process.stdout.write(`functionsHost/twoParticipants: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
    await Promise.all(stores.map((s) => s.close()));
  });

  test('both are polled, both copy, the migration completes', async () => {
    const id = `two-${Date.now()}`;
    const put = await json(`${host.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
    stores.forEach((store, i) => store.stores.get('westeurope')?.put(id, `msg-${i + 1}`, 'hello', 1));
    const began = Date.now();
    const started = await json(`${host.api}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId: id, target: TO }),
    });
    expect(started.status).toBe(202);
    instances.push(String(started.body.instanceId));
    await explained(
      host,
      () => instances,
      async () => {
        const { body } = await watchMigration(host, String(started.body.migrationId));
        process.stdout.write(
          `functionsHost/twoParticipants: migration ${String(body.status)} after ${Date.now() - began} ms\n`,
        );
        expect(body.status).toBe('Completed');
        for (const store of stores) expect(store.counters.polls).toBeGreaterThan(0);
        expect(
          stores.map((s) =>
            s.stores
              .get('eastus')
              ?.list(id)
              .map((m) => m.messageId),
          ),
        ).toEqual([['msg-1'], ['msg-2']]);
        expect(stores.map((s) => s.copies.map((c) => c.step))).toEqual([
          ['bulkCopy', 'deltaCopy'],
          ['bulkCopy', 'deltaCopy'],
        ]);
        expect((await json(`${host.api}/routes/${id}`)).body.location).toEqual(TO);
      },
    );
  });
});
