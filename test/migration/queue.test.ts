import { QueueClient } from '@azure/storage-queue';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { decodeBase64, hostQueueRetry, timeSpanSeconds } from '../../local/queueConsumer';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type AzuriteQueue, startAzuriteQueue } from '../support/azurite';
import { FaultyStore } from '../../testkit/faultyStore';
import { poll } from '../support/poll';

/**
 * The `migrations` queue on Azurite, consumed by the embedded host with the Functions host's
 * semantics: base64 JSON messages, invalid ones to `migrations-poison` at once, failing ones retried
 * until their fifth dequeue and then poisoned.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
let azurite: AzuriteQueue;
let host: LocalHost;
let store: FaultyStore;
let logs: string[] = [];
/** The retry backoff of the host under test; host.json's 30 s unless a test shortens it. */
let retryAfterSeconds: number | undefined = 1;

beforeAll(async () => {
  azurite = await startAzuriteQueue();
}, 60_000);
afterAll(async () => {
  await azurite?.close();
});
beforeEach(async () => {
  store = new FaultyStore(new SqliteStore(':memory:'));
  logs = [];
  host = await startLocalHost({
    env: {
      PORT: '0',
      AzureWebJobsStorage: azurite.connectionString,
      ROUTELOCK_CACHE_TIERS: 'local=1',
      ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
    },
    store,
    log: (_level, message) => logs.push(message),
    queueRetry: retryAfterSeconds === undefined ? {} : { retryAfterSeconds },
  });
  await host.services.router.createRoute('conv-q', SOURCE);
});
afterEach(async () => {
  await host?.close();
  // empty both queues between tests
  for (const name of ['migrations', 'migrations-poison']) await queue(name).clearMessages();
});

const queue = (name: string) => new QueueClient(azurite.connectionString, name);
const send = (text: string) => queue('migrations').sendMessage(text);
const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');

async function poisoned(): Promise<string[]> {
  const { peekedMessageItems } = await queue('migrations-poison').peekMessages({ numberOfMessages: 32 });
  return peekedMessageItems.map((m) => m.messageText);
}

test('an enqueued base64 JSON message runs a migration to Completed', async () => {
  await send(b64({ resourceId: 'conv-q', target: TARGET, migrationId: 'm-queue-1' }));
  const record = await poll(
    () => host.state.get('m-queue-1'),
    (r) => r?.done === true,
  );
  expect(record?.status).toMatchObject({ status: 'Completed', resourceId: 'conv-q' });
  const doc = (await store.read('conv-q', { from: 'writeRegion' })).doc;
  expect(doc).toMatchObject({ location: TARGET, lock: null });
  expect(await poisoned()).toEqual([]);
}, 30_000);

test.each([
  ['not base64', 'this is not base64!'],
  ['base64 of text that is not JSON', b64('hello')],
  ['JSON without a target', b64({ resourceId: 'conv-q' })],
  ['an unknown field', b64({ resourceId: 'conv-q', target: TARGET, priority: 'high' })],
  ['a route that does not exist', b64({ resourceId: 'ghost', target: TARGET })],
])('a malformed message (%s) lands in migrations-poison and starts nothing', async (_name, text) => {
  await send(text);
  const poison = await poll(poisoned, (p) => p.length === 1);
  expect(poison).toEqual([text]);
  expect(host.state.recent(10)).toHaveLength(0);
  const { peekedMessageItems } = await queue('migrations').peekMessages();
  expect(peekedMessageItems).toHaveLength(0);
});

test('a message that keeps failing (store down) is retried and poisoned after its fifth dequeue', async () => {
  store.down = true;
  // the route created above sits in the router's 1 s cache: without this a message dequeued within
  // that second would start from the cache, and the test would depend on when the consumer polls
  host.services.router.forget('conv-q');
  const text = b64({ resourceId: 'conv-q', target: TARGET });
  await send(text);
  const poison = await poll(poisoned, (p) => p.length === 1, 40_000);
  expect(poison).toEqual([text]);
  expect(host.state.recent(10)).toHaveLength(0);
  const failures = logs.filter((l) => l.startsWith('migration message failed'));
  expect(failures).toEqual([1, 2, 3, 4, 5].map((n) => `migration message failed (dequeue ${n} of 5)`));
}, 60_000);

describe("with host.json's backoff", () => {
  beforeAll(() => void (retryAfterSeconds = undefined));
  afterAll(() => void (retryAfterSeconds = 1));

  test('a failed message stays invisible for the backoff instead of being retried back to back', async () => {
    store.down = true;
    // the route created above sits in the router's 1 s cache: without this a message dequeued within
    // that second would start from the cache, and the test would depend on when the consumer polls
    host.services.router.forget('conv-q');
    await send(b64({ resourceId: 'conv-q', target: TARGET }));
    await poll(
      async () => logs.filter((l) => l.startsWith('migration message failed')),
      (f) => f.length === 1,
    );
    await new Promise((resolve) => setTimeout(resolve, 3000));
    // still one failure, the message hidden, nothing poisoned (with the old 1 s it would be dequeued again)
    expect(logs.filter((l) => l.startsWith('migration message failed'))).toEqual([
      'migration message failed (dequeue 1 of 5)',
    ]);
    const { peekedMessageItems } = await queue('migrations').peekMessages();
    expect(peekedMessageItems).toHaveLength(0);
    expect(await poisoned()).toEqual([]);
  }, 20_000);
});

test('the embedded host retries as host.json says: 30 s backoff, poisoned at the fifth dequeue', () => {
  expect(hostQueueRetry).toEqual({ retryAfterSeconds: 30, maxDequeueCount: 5 });
  expect(timeSpanSeconds('1.02:03:04')).toBe(93784);
  expect(() => timeSpanSeconds('30')).toThrow('not a TimeSpan');
});

test('base64 decoding follows the host: only valid base64 decodes', () => {
  expect(decodeBase64(b64({ a: 1 }))).toBe('{"a":1}');
  expect(decodeBase64('abc')).toBeUndefined();
  expect(decodeBase64('a b=')).toBeUndefined();
});
