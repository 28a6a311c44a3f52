import { InvocationContext } from '@azure/functions';
import { QueueClient } from '@azure/storage-queue';
import {
  CAMPAIGN_POISON_QUEUE,
  CAMPAIGN_QUEUE,
  campaignPoisonOutput,
  campaignQueueHandler,
  handleCampaignMessage,
  messageCampaignId,
} from '../../functions/campaignQueue';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { CampaignService } from '../../shared/campaign/service';
import type { CampaignStatus } from '../../shared/campaign/types';
import { RouteLockError } from '../../shared/core/errors';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type AzuriteQueue, startAzuriteQueue } from '../support/azurite';
import { poll } from '../support/poll';

/**
 * The `campaigns` queue (a queue message starts a campaign as one starts a migration) on
 * Azurite, consumed by the embedded host with the Functions host's semantics: base64 JSON, an invalid
 * message to `campaigns-poison` unchanged at once, a transient failure thrown for the queue to retry.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
let azurite: AzuriteQueue;
let host: LocalHost;
let logs: string[] = [];

beforeAll(async () => {
  azurite = await startAzuriteQueue();
  host = await startLocalHost({
    env: { PORT: '0', AzureWebJobsStorage: azurite.connectionString },
    store: new SqliteStore(':memory:'),
    log: (_level, message) => logs.push(message),
    queueRetry: { retryAfterSeconds: 1 },
  });
  for (const id of ['conv-q1', 'conv-q2', 'conv-q3']) await host.services.router.createRoute(id, SOURCE);
}, 60_000);
afterAll(async () => {
  await host?.close();
  await azurite?.close();
});
afterEach(async () => {
  for (const name of [CAMPAIGN_QUEUE, CAMPAIGN_POISON_QUEUE]) await queue(name).clearMessages();
  logs = [];
});

const queue = (name: string) => new QueueClient(azurite.connectionString, name);
const b64 = (value: unknown) =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64');
const campaigns = (): CampaignService => host.services.campaigns(new InvocationContext());
const ids = async () => (await campaigns().list({ limit: 1000 })).items.map((s) => s.campaignId).sort();

async function poisoned(): Promise<string[]> {
  const { peekedMessageItems } = await queue(CAMPAIGN_POISON_QUEUE).peekMessages({ numberOfMessages: 32 });
  return peekedMessageItems.map((m) => m.messageText);
}

test('a message on `campaigns` starts a campaign that runs to Completed', async () => {
  await queue(CAMPAIGN_QUEUE).sendMessage(
    b64({ campaignId: 'c-queued', target: TARGET, resources: ['conv-q1', 'conv-q2'], maxConcurrent: 2 }),
  );
  const done = await poll(
    () =>
      campaigns()
        .status('c-queued')
        .catch(() => null),
    (s: CampaignStatus | null) => s?.status === 'Completed',
    60_000,
  );
  expect(done?.counts).toMatchObject({ total: 2, completed: 2 });
  expect(await poisoned()).toEqual([]);
  expect(logs).toContain('campaign message started');
}, 90_000);

test('a message without a campaignId is named after the queue message: a redelivery answers the standing campaign', async () => {
  const body = { target: TARGET, resources: ['conv-q3'] };
  const { messageId } = await queue(CAMPAIGN_QUEUE).sendMessage(b64(body));
  const campaignId = messageCampaignId(messageId);
  const started = await poll(
    () =>
      campaigns()
        .status(campaignId)
        .catch(() => null),
    (s: CampaignStatus | null) => s !== null,
  );
  expect(started?.counts.total).toBe(1);
  const before = await ids();
  // the same message again (a redelivery: same message id): nothing new
  expect(await handleCampaignMessage(JSON.stringify(body), messageId, campaigns())).toEqual({
    kind: 'standing',
    campaignId,
  });
  // …and through the Functions handler, which reads the id from the trigger metadata
  const context = new InvocationContext({ triggerMetadata: { id: messageId }, logHandler: () => undefined });
  await campaignQueueHandler(body, context, { campaigns: () => campaigns() });
  expect(context.extraOutputs.get(campaignPoisonOutput)).toBeUndefined();
  expect(await ids()).toEqual(before);
  // a redelivery adds the message's ids again (a create that died before them is so completed),
  // each kept once: still one member
  expect((await campaigns().status(campaignId)).counts.total).toBe(1);

  // negative control: without the message id a redelivery would be a second campaign
  const first = await handleCampaignMessage(body, undefined, campaigns());
  const second = await handleCampaignMessage(body, undefined, campaigns());
  expect(first.kind).toBe('started');
  expect(second.kind).toBe('started');
  expect(first).not.toEqual(second);
}, 60_000);

test.each([
  ['not base64', 'this is not base64!'],
  ['base64 of text that is not JSON', b64('hello')],
  ['no target', b64({ resources: ['conv-q1'] })],
  [
    'both resources and from',
    b64({ target: TARGET, resources: ['conv-q1'], from: { region: 'westeurope' } }),
  ],
  ['over 1,000 ids', b64({ target: TARGET, resources: Array.from({ length: 1001 }, (_, i) => `r-${i}`) })],
  ['an unknown field', b64({ target: TARGET, resources: ['conv-q1'], priority: 'high' })],
])('a bad message (%s) lands in campaigns-poison unchanged and starts nothing', async (_name, text) => {
  const before = await ids();
  await queue(CAMPAIGN_QUEUE).sendMessage(text);
  const poison = await poll(poisoned, (p) => p.length === 1);
  expect(poison).toEqual([text]);
  expect(await ids()).toEqual(before);
  const { peekedMessageItems } = await queue(CAMPAIGN_QUEUE).peekMessages();
  expect(peekedMessageItems).toHaveLength(0);
  expect(logs.some((l) => l.startsWith('campaign message rejected: '))).toBe(true);
});

test('a campaignId that stands for another target is poisoned at once (no retry can fix it)', async () => {
  await campaigns().create({ campaignId: 'c-taken', target: TARGET, resources: ['ghost-1'] }, { id: 'test' });
  const text = b64({ campaignId: 'c-taken', target: SOURCE, resources: ['ghost-1'] });
  await queue(CAMPAIGN_QUEUE).sendMessage(text);
  expect(await poll(poisoned, (p) => p.length === 1)).toEqual([text]);
  expect(logs.find((l) => l.startsWith('campaign message rejected: '))).toMatch(/CampaignExists/);
  expect((await campaigns().status('c-taken')).target).toEqual(TARGET);
});

test('a transient failure is thrown for the queue to retry; a permanent one is poison', async () => {
  const failing = (error: unknown): CampaignService =>
    ({
      create: () => Promise.reject(error),
    }) as unknown as CampaignService;
  const body = { campaignId: 'c-x', target: TARGET, resources: ['r-1'] };
  const outage = new RouteLockError('StoreUnavailable', 'the store is down');
  await expect(handleCampaignMessage(body, 'm-1', failing(outage))).rejects.toBe(outage);
  const unknown = new Error('socket hang up');
  await expect(handleCampaignMessage(body, 'm-1', failing(unknown))).rejects.toBe(unknown);
  expect(
    await handleCampaignMessage(body, 'm-1', failing(new RouteLockError('RegionNotAllowed', 'no'))),
  ).toEqual({ kind: 'poison', reason: 'RegionNotAllowed: no' });
  // the Functions handler copies a poison message to campaigns-poison as it was sent
  const context = new InvocationContext({ triggerMetadata: { id: 'm-2' }, logHandler: () => undefined });
  await campaignQueueHandler('{"target":', context, { campaigns: () => failing(outage) });
  expect(context.extraOutputs.get(campaignPoisonOutput)).toBe('{"target":');
});
