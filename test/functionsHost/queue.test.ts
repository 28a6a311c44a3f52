import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { QueueClient } from '@azure/storage-queue';
import Database from 'better-sqlite3';
import { instanceIdFor } from '../../shared/migration/instanceId';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';
import { type FunctionsHost, explained, json, startHost, watchMigration } from './host';

/**
 * The `migrations` queue on the real Storage Queues extension (hosts/webjobs through `npm run
 * start:functions`), on Azurite: a queued migration runs to Completed on the real Durable extension; a
 * message the app rejects goes to `migrations-poison` at once; a message that fails every try (the store
 * locked under it) is retried by the host after host.json's visibility timeout and poisoned by the host at
 * the fifth dequeue. host.json is the project's with the visibility timeout cut to 2 s (30 s there), so the
 * retries fit a short run while still showing the setting applied: the default would retry at once.
 */

jest.setTimeout(120_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const VISIBILITY_MS = 2_000;

/** The project's host.json, its queue visibility timeout 2 s. */
function shortHostJson(): string {
  const hostJson = JSON.parse(readFileSync(join(__dirname, '../../host.json'), 'utf8')) as {
    extensions: { queues: Record<string, unknown> };
  };
  expect(hostJson.extensions.queues.maxDequeueCount).toBe(5);
  hostJson.extensions.queues.visibilityTimeout = '00:00:02';
  const path = join(scratchDir('hostjson-'), 'host.json');
  writeFileSync(path, JSON.stringify(hostJson, null, 2));
  return path;
}

const encode = (text: string) => Buffer.from(text).toString('base64');
const decode = (text: string) => Buffer.from(text, 'base64').toString('utf8');

describe('the migrations queue on the real Storage Queues extension', () => {
  let host: FunctionsHost;
  let queue: QueueClient;
  let poison: QueueClient;

  beforeAll(async () => {
    // Information: the host's "Executing"/"Executed" lines for each try, the spacing measured on them
    host = await startHost({ ROUTELOCK_HOST_JSON: shortHostJson(), ROUTELOCK_HOST_LOG_LEVEL: 'Information' });
    queue = new QueueClient(host.storage, 'migrations');
    poison = new QueueClient(host.storage, 'migrations-poison');
    await queue.createIfNotExists();
    await poison.createIfNotExists();
    process.stdout.write(`functionsHost/queue: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
  });

  async function route(id: string) {
    const put = await json(`${host.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
  }

  /** The poison queue's messages, decoded, until one satisfies `until`. */
  const poisoned = (until: (texts: string[]) => boolean, timeoutMs: number) =>
    poll(
      async () =>
        (await poison.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.map((m) =>
          decode(m.messageText),
        ),
      until,
      timeoutMs,
    );

  test('a queued migration runs to Completed', async () => {
    const id = `queued-${Date.now()}`;
    await route(id);
    const began = Date.now();
    await queue.sendMessage(encode(JSON.stringify({ resourceId: id, target: TO })));
    await explained(
      host,
      () => [instanceIdFor(id)],
      async () => {
        const listed = await poll(
          async () =>
            (await json(`${host.api}/migrations?resourceId=${id}`)).body.items as { migrationId: string }[],
          (items) => items.length > 0,
          30_000,
        );
        const { body } = await watchMigration(host, String(listed[0]?.migrationId));
        process.stdout.write(
          `functionsHost/queue: queued migration ${String(body.status)} after ${Date.now() - began} ms\n`,
        );
        expect(body.status).toBe('Completed');
        expect((await json(`${host.api}/routes/${id}`)).body.location).toEqual(TO);
      },
    );
  });

  test('a message the app rejects goes to migrations-poison at the first try', async () => {
    const bad = JSON.stringify({ resourceId: `no-such-route-${Date.now()}`, target: TO });
    const from = host.lines().length;
    await queue.sendMessage(encode(bad));
    await poisoned((texts) => texts.includes(bad), 30_000);
    // one try, which succeeded: the app wrote the poison copy itself, the host did not retry it
    const tries = await poll(
      () =>
        host
          .lines()
          .slice(from)
          .filter((l) => /Executed 'migrationQueue'/.test(l.text)),
      (seen) => seen.length > 0,
      5_000,
    );
    expect(tries.map((l) => /\((\w+),/.exec(l.text)?.[1])).toEqual(['Succeeded']);
    expect(
      host
        .lines()
        .slice(from)
        .filter((l) => /Executing 'migrationQueue'/.test(l.text)),
    ).toHaveLength(1);
  });

  test('a message failing every try: retried after the visibility timeout, poisoned by the host at the fifth dequeue', async () => {
    const id = `stuck-${Date.now()}`;
    await route(id);
    const message = JSON.stringify({ resourceId: id, target: TO });
    // the store locked under the app: its claim write waits out SQLite's busy timeout and throws
    const db = new Database(host.dataPath);
    db.exec('BEGIN EXCLUSIVE');
    const from = host.lines().length;
    try {
      await queue.sendMessage(encode(message));
      await poisoned((texts) => texts.includes(message), 90_000);
    } finally {
      db.exec('ROLLBACK');
      db.close();
    }
    const lines = host.lines().slice(from);
    const starts = lines.filter((l) => /Executing 'migrationQueue'/.test(l.text)).map((l) => l.at);
    const failures = lines.filter((l) => /Executed 'migrationQueue' \(Failed/.test(l.text)).map((l) => l.at);
    const gaps = failures.slice(0, -1).map((end, i) => (starts[i + 1] ?? Number.NaN) - end);
    process.stdout.write(
      `functionsHost/queue: ${starts.length} tries; from a failed try to the next: ${gaps.map((g) => `${g} ms`).join(', ')}\n`,
    );
    expect(starts).toHaveLength(5);
    expect(failures).toHaveLength(5);
    for (const gap of gaps) {
      expect(gap).toBeGreaterThanOrEqual(VISIBILITY_MS - 100);
      expect(gap).toBeLessThan(VISIBILITY_MS + 3_000);
    }
    // nothing started: the claim never got written, so the route is free for the next start
    expect(((await json(`${host.api}/migrations?resourceId=${id}`)).body.items as unknown[]).length).toBe(0);
  });
});
