import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { mayDeleteCopy } from '../../shared/participant';
import { MessageStore, type MessageStoreOptions } from '../../examples/message-store/service';
import { compareRegions } from '../../examples/message-store/verification';
import type { RouteView } from '../../shared/core/lock/view';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { poll } from '../support/poll';

/**
 * The example participant (examples/message-store) keeps every rule of the participant contract
 * (docs/design.md §6.5), driven over HTTP as routelock drives it: one test per rule, and a negative
 * control for the supersede rule.
 */

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const LOCK_AT = '2026-12-01T10:00:00.000Z';

/** A request body exactly as the contract specifies it (what the workflow sends). */
function contractBody(
  job: {
    migrationId?: string;
    resourceId?: string;
    step?: string;
    migrationAttempt?: number;
    stepAttempt?: number;
    sequence?: number;
    lockAcquiredAt?: string;
  } = {},
) {
  const step = job.step ?? 'bulkCopy';
  const stepAttempt = job.stepAttempt ?? 1;
  return {
    migrationId: job.migrationId ?? 'm-1',
    resourceId: job.resourceId ?? 'conv-1',
    from: FROM,
    to: TO,
    step,
    migrationAttempt: job.migrationAttempt ?? 1,
    stepAttempt,
    attempt: stepAttempt,
    sequence: job.sequence ?? (step === 'bulkCopy' ? 1 : 1 + stepAttempt),
    lockAcquiredAt: job.lockAcquiredAt ?? LOCK_AT,
  };
}

const stores: MessageStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function participant(options: Partial<MessageStoreOptions> = {}) {
  const store = new MessageStore({
    regions: { westeurope: ':memory:', eastus: ':memory:' },
    copyDelayMs: 150,
    ...options,
  });
  stores.push(store);
  await store.listen();
  // Seed the source region directly (the copy jobs need no routing service).
  store.stores.get('westeurope')?.put('conv-1', 'msg-1', 'hello', 1);
  store.stores.get('westeurope')?.put('conv-1', 'msg-2', 'world', 2);
  return store;
}

interface Answer {
  status: number;
  location: string | null;
  retryAfter: string | null;
  body: Record<string, unknown>;
}

async function answer(response: Response): Promise<Answer> {
  return {
    status: response.status,
    location: response.headers.get('location'),
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

async function post(store: MessageStore, body: unknown): Promise<Answer> {
  return answer(
    await fetch(`${store.url}/migrate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );
}

async function get(location: string): Promise<Answer> {
  return answer(await fetch(location));
}

/** Poll a Location until it stops answering 202 (as routelock does), and return the final answer. */
async function settle(location: string): Promise<Answer> {
  return poll(
    () => get(location),
    (a) => a.status !== 202,
    10_000,
  );
}

const targetMessages = (store: MessageStore) =>
  store.stores
    .get('eastus')
    ?.list('conv-1')
    .map((m) => m.messageId);

test('a contract request starts the job: 202 with an absolute Location and Retry-After, never 200 before the copy is done', async () => {
  const store = await participant({ retryAfterSeconds: 2 });
  const first = await post(store, contractBody());
  expect(first.status).toBe(202);
  expect(first.body).toEqual({ done: false });
  expect(first.retryAfter).toBe('2');
  // absolute: parses without a base (the Durable extension's `new Uri(location)`), on the store's origin
  const location = new URL(first.location as string);
  expect(location.origin).toBe(store.url);
  expect(targetMessages(store)).toEqual([]);
  const running = await get(location.href);
  expect(running).toMatchObject({ status: 202, location: location.href, retryAfter: '2' });
  const done = await settle(location.href);
  expect(done).toMatchObject({ status: 200, body: { done: true } });
  // 200 only once the data is really at the target
  expect(targetMessages(store)).toEqual(['msg-1', 'msg-2']);
  // the job, POSTed again once done, answers 200 and copies nothing more
  expect(await post(store, contractBody())).toMatchObject({ status: 200, body: { done: true } });
  expect(store.copies).toHaveLength(1);
});

test('publicUrl names the origin of the poll Location (a service behind a gateway)', async () => {
  const store = await participant({ publicUrl: 'https://messages.example.com' });
  const first = await post(store, contractBody());
  expect(first.location).toMatch(/^https:\/\/messages\.example\.com\/jobs\/[^/]+$/);
});

test('a repeated POST of the same job answers for it and never starts a second copy', async () => {
  const store = await participant();
  const answers = await Promise.all(Array.from({ length: 5 }, () => post(store, contractBody())));
  expect(answers.map((a) => a.status)).toEqual([202, 202, 202, 202, 202]);
  expect(new Set(answers.map((a) => a.location)).size).toBe(1);
  expect((await settle(answers[0]?.location as string)).status).toBe(200);
  expect(store.copies).toHaveLength(1);
});

test('the job is (migrationId, migrationAttempt, step, stepAttempt): each other value is another job', async () => {
  const store = await participant({ copyDelayMs: 5 });
  const base = { sequence: 1 };
  const jobs = [
    contractBody({ ...base }),
    contractBody({ sequence: 2, step: 'deltaCopy', stepAttempt: 1 }),
    contractBody({ sequence: 3, step: 'deltaCopy', stepAttempt: 2 }),
    contractBody({ sequence: 1, migrationAttempt: 2, lockAcquiredAt: '2026-12-01T11:00:00.000Z' }),
    contractBody({ sequence: 1, migrationId: 'm-2', lockAcquiredAt: '2026-12-01T12:00:00.000Z' }),
  ];
  const locations = new Set<string>();
  for (const body of jobs) {
    const first = await post(store, body);
    expect(first.status).toBe(202);
    locations.add(first.location as string);
    expect((await settle(first.location as string)).status).toBe(200);
  }
  expect(locations.size).toBe(jobs.length);
  expect(store.copies).toHaveLength(jobs.length);
});

test('a re-POST of a job that failed starts it again', async () => {
  const store = await participant({ copyDelayMs: 20 });
  store.failNextCopies(1);
  const first = await post(store, contractBody());
  const failed = await settle(first.location as string);
  expect(failed).toMatchObject({ status: 500, body: { error: 'injected copy failure' } });
  expect(targetMessages(store)).toEqual([]);
  const again = await post(store, contractBody());
  expect(again).toMatchObject({ status: 202, location: first.location });
  expect(await settle(again.location as string)).toMatchObject({ status: 200 });
  expect(targetMessages(store)).toEqual(['msg-1', 'msg-2']);
  expect(store.copies).toHaveLength(1);
});

describe('a newer job of a resource supersedes an older one', () => {
  /**
   * The fleet simulation's case: an overrun delta attempt whose copy finishes after its successor's (and
   * after writes resumed at the target) must not land, or it overwrites the live target with stale rows.
   */
  async function lateOlderCopy(options: Partial<MessageStoreOptions>) {
    // attempt 1 is slow, attempt 2 quick: attempt 1 would finish long after attempt 2
    const store = await participant({ copyDelayMs: (job) => (job.stepAttempt === 1 ? 400 : 50), ...options });
    const attempt1 = await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 1, sequence: 2 }));
    const attempt2 = await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 2, sequence: 3 }));
    expect([attempt1.status, attempt2.status]).toEqual([202, 202]);
    expect((await settle(attempt2.location as string)).status).toBe(200);
    // after the swap, a user edits a message at the target
    store.stores.get('eastus')?.put('conv-1', 'msg-1', 'edited after the swap', 10);
    await new Promise((r) => setTimeout(r, 500)); // past the time attempt 1's copy would land
    const text = store.stores
      .get('eastus')
      ?.list('conv-1')
      .find((m) => m.messageId === 'msg-1')?.text;
    return { store, attempt1, text };
  }

  test('a later delta attempt (sequence) stops the one before: its poll answers 409 and its copy never lands', async () => {
    const { store, attempt1, text } = await lateOlderCopy({});
    expect(await get(attempt1.location as string)).toMatchObject({
      status: 409,
      body: { error: 'superseded', supersededBy: { step: 'deltaCopy', stepAttempt: 2, sequence: 3 } },
    });
    expect(store.copies.map((c) => c.stepAttempt)).toEqual([2]);
    expect(text).toBe('edited after the swap');
  });

  test('negative control: a build that ignores supersession lands the older copy late and loses the edit', async () => {
    const { store, text } = await lateOlderCopy({ ignoreSupersede: true });
    // the checks above catch it: the superseded attempt's copy landed after its successor's
    expect(store.copies.map((c) => c.stepAttempt)).toEqual([2, 1]);
    expect(text).toBe('hello');
  });

  test('a later migration (lockAcquiredAt) supersedes an earlier one whatever their sequences', async () => {
    const store = await participant({ copyDelayMs: 300 });
    const old = await post(
      store,
      contractBody({ migrationId: 'm-1', step: 'deltaCopy', stepAttempt: 3, sequence: 4 }),
    );
    const newer = await post(
      store,
      contractBody({ migrationId: 'm-2', sequence: 1, lockAcquiredAt: '2026-12-01T10:00:00.001Z' }),
    );
    expect(newer.status).toBe(202);
    expect((await get(old.location as string)).status).toBe(409);
    expect((await settle(newer.location as string)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
    expect(store.copies.map((c) => c.migrationId)).toEqual(['m-2']);
  });

  test('a POST of a job older than one seen answers 409, naming the newest', async () => {
    const store = await participant({ copyDelayMs: 5 });
    const bulk = await post(store, contractBody());
    await settle(bulk.location as string);
    const delta = await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 2, sequence: 3 }));
    expect(delta.status).toBe(202);
    // a job not seen before with a lower sequence, the bulk copy seen before, an earlier migration
    for (const older of [
      contractBody({ step: 'deltaCopy', stepAttempt: 1, sequence: 2 }),
      contractBody(),
      contractBody({ migrationId: 'm-0', sequence: 9, lockAcquiredAt: '2026-12-01T09:59:59.999Z' }),
    ]) {
      expect(await post(store, older)).toMatchObject({
        status: 409,
        body: { newest: { migrationId: 'm-1', step: 'deltaCopy', stepAttempt: 2, sequence: 3 } },
      });
    }
    // the newest job is still answered for
    expect((await settle(delta.location as string)).status).toBe(200);
    expect((await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 2, sequence: 3 }))).status).toBe(
      200,
    );
  });

  test('jobs of other resources are not ordered against each other', async () => {
    const store = await participant({ copyDelayMs: 5 });
    const a = await post(
      store,
      contractBody({ resourceId: 'conv-1', sequence: 5, step: 'deltaCopy', stepAttempt: 4 }),
    );
    const b = await post(
      store,
      contractBody({ resourceId: 'conv-2', migrationId: 'm-9', lockAcquiredAt: '2026-01-01T00:00:00Z' }),
    );
    expect([a.status, b.status]).toEqual([202, 202]);
    expect((await settle(a.location as string)).status).toBe(200);
    expect((await settle(b.location as string)).status).toBe(200);
  });
});

test.each(['notifyCutover', 'swap'])(
  'an optional step it does not implement (%s) answers 404',
  async (step) => {
    const store = await participant();
    expect(await post(store, contractBody({ step }))).toMatchObject({
      status: 404,
      body: { error: `step ${step} is not implemented` },
    });
    expect(store.copies).toEqual([]);
  },
);

test('preflight (a dry run) answers 200 with each region reachable and its counts, and copies nothing', async () => {
  const store = await participant();
  store.stores.get('westeurope')?.tombstone('conv-1', 'msg-2', 3);
  const asked = { resourceId: 'conv-1', from: FROM, to: TO, step: 'preflight' };
  expect(await post(store, asked)).toMatchObject({
    status: 200,
    body: {
      ready: true,
      from: { region: 'westeurope', reachable: true, items: 1, tombstones: 1 },
      to: { region: 'eastus', reachable: true, items: 0, tombstones: 0 },
    },
  });
  expect(await post(store, { ...asked, to: { region: 'mars' } })).toMatchObject({
    status: 200,
    body: { ready: false, to: { region: 'mars', reachable: false } },
  });
  expect((await post(store, { step: 'preflight' })).status).toBe(400);
  expect(store.copies).toEqual([]);
  expect(targetMessages(store)).toEqual([]);
});

test('a poll of an unknown job answers 404', async () => {
  const store = await participant();
  expect((await get(`${store.url}/jobs/j-404`)).status).toBe(404);
});

test('an old caller (only `attempt`) is attempt 1 of the migration with sequence = attempt', async () => {
  const store = await participant({ copyDelayMs: 300 });
  const legacy = (step: string, attempt?: number) => ({
    migrationId: 'm-1',
    resourceId: 'conv-1',
    from: FROM,
    to: TO,
    step,
    ...(attempt === undefined ? {} : { attempt }),
  });
  const bulk = await post(store, legacy('bulkCopy'));
  expect(bulk.status).toBe(202);
  expect((await settle(bulk.location as string)).status).toBe(200);
  const delta1 = await post(store, legacy('deltaCopy', 1));
  const delta2 = await post(store, legacy('deltaCopy', 2));
  expect([delta1.status, delta2.status]).toEqual([202, 202]);
  // attempt 2 supersedes attempt 1; the same job in the new form is the same job
  expect((await get(delta1.location as string)).status).toBe(409);
  expect(await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 2, sequence: 2 }))).toMatchObject({
    status: 202,
    location: delta2.location,
  });
  expect(
    store.jobs.get(new URL(delta2.location as string).pathname.split('/')[2] as string)?.request,
  ).toMatchObject({
    migrationAttempt: 1,
    stepAttempt: 2,
    sequence: 2,
    lockAcquiredAt: undefined,
  });
});

test.each([
  ['not JSON', '{', /JSON/],
  ['no migrationId', { ...contractBody(), migrationId: undefined }, /migrationId/],
  ['a sequence of 0', contractBody({ sequence: 0 }), /sequence/],
  ['a lockAcquiredAt that is no time', contractBody({ lockAcquiredAt: 'yesterday' }), /lockAcquiredAt/],
  ['attempt ≠ stepAttempt', { ...contractBody(), attempt: 2 }, /attempt/],
])('a malformed request (%s) answers 400', async (_, body, error) => {
  const store = await participant();
  const refused = await post(store, body);
  expect(refused.status).toBe(400);
  expect(refused.body.error).toMatch(error);
});

test("openapi.yaml's ParticipantJob (webhooks participantStep) names exactly the fields of a contract request", () => {
  const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as {
    webhooks: {
      participantStep: { post: { requestBody: { content: Record<string, { schema: { $ref: string } }> } } };
    };
    components: { schemas: { ParticipantJob: { required: string[]; properties: Record<string, unknown> } } };
  };
  expect(spec.webhooks.participantStep.post.requestBody.content['application/json']?.schema.$ref).toBe(
    '#/components/schemas/ParticipantJob',
  );
  const job = spec.components.schemas.ParticipantJob;
  expect([...job.required].sort()).toEqual(Object.keys(contractBody()).sort());
  expect(Object.keys(job.properties).sort()).toEqual(Object.keys(contractBody()).sort());
});

describe('verify (docs/design.md §6.5): counts and a digest of the resource at each region', () => {
  const verifyBody = (resourceId = 'conv-1') => contractBody({ step: 'verify', resourceId, stepAttempt: 1 });

  async function copied(options: Partial<MessageStoreOptions> = {}) {
    const store = await participant({ copyDelayMs: 5, ...options });
    expect((await settle((await post(store, contractBody())).location as string)).status).toBe(200);
    return store;
  }

  test('after a faithful copy: a match, equal counts, the digest, no detail; tombstones count as absent', async () => {
    const store = await participant({ copyDelayMs: 5 });
    store.stores.get('westeurope')?.put('conv-1', 'msg-3', 'gone soon', 3);
    store.stores.get('westeurope')?.tombstone('conv-1', 'msg-3', 4);
    expect((await settle((await post(store, contractBody())).location as string)).status).toBe(200);
    const answer = await post(store, verifyBody());
    expect(answer).toMatchObject({ status: 200, body: { match: true, sourceCount: 2, targetCount: 2 } });
    expect(answer.body.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(answer.body.detail).toBeUndefined();
    expect(store.counters).toMatchObject({ verifications: 1, mismatches: 0 });
    // a read: no job, nothing copied
    expect(store.copies).toHaveLength(1);
  });

  test('a planted missing item is found: no match, the counts differ, the detail names its id (not its text)', async () => {
    const store = await copied();
    store.stores.get('eastus')?.remove('conv-1', 'msg-2');
    const answer = await post(store, verifyBody());
    expect(answer).toMatchObject({ status: 200, body: { match: false, sourceCount: 2, targetCount: 1 } });
    expect(answer.body.detail).toMatch(/^1 missing at the target \(msg-2\)/);
    expect(answer.body.detail).not.toMatch(/world/);
    expect(store.counters.mismatches).toBe(1);
  });

  test.each([
    [
      'another text (same id, same count)',
      (s: MessageStore) => s.stores.get('eastus')?.put('conv-1', 'msg-1', 'hullo', 1),
      /1 different at the target \(msg-1\)/,
    ],
    [
      'another version',
      (s: MessageStore) => s.stores.get('eastus')?.put('conv-1', 'msg-1', 'hello', 9),
      /1 different at the target \(msg-1\)/,
    ],
    [
      'an item only at the target',
      (s: MessageStore) => s.stores.get('eastus')?.put('conv-1', 'stray', 'x', 1),
      /1 only at the target \(stray\)/,
    ],
    [
      'a source item the delta never carried',
      (s: MessageStore) => s.stores.get('westeurope')?.put('conv-1', 'msg-9', 'late', 9),
      /1 missing at the target \(msg-9\)/,
    ],
  ])('%s is a mismatch', async (_, plant, detail) => {
    const store = await copied();
    plant(store);
    const answer = await post(store, verifyBody());
    expect(answer.body).toMatchObject({ match: false });
    expect(answer.body.detail).toMatch(detail);
  });

  test('the delta seam: a delta that loses an item is caught, and the next delta copied faithfully verifies', async () => {
    const store = await copied();
    store.stores.get('westeurope')?.put('conv-1', 'msg-3', 'during the hard-delete lock', 3);
    store.dropItemFromNextDelta('conv-1');
    const delta1 = await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 1, sequence: 2 }));
    expect((await settle(delta1.location as string)).status).toBe(200);
    expect(await post(store, contractBody({ step: 'verify', stepAttempt: 1, sequence: 2 }))).toMatchObject({
      body: {
        match: false,
        sourceCount: 3,
        targetCount: 2,
        detail: expect.stringMatching(/missing at the target \(msg-3\)/),
      },
    });
    const delta2 = await post(store, contractBody({ step: 'deltaCopy', stepAttempt: 2, sequence: 3 }));
    expect((await settle(delta2.location as string)).status).toBe(200);
    expect(await post(store, contractBody({ step: 'verify', stepAttempt: 2, sequence: 3 }))).toMatchObject({
      body: { match: true, sourceCount: 3, targetCount: 3 },
    });
    expect(store.counters).toMatchObject({ verifications: 2, mismatches: 1, deltaItemsDropped: 1 });
  });

  test('a malformed verify, or one naming a region it does not hold, answers 400', async () => {
    const store = await participant();
    expect((await post(store, { ...verifyBody(), resourceId: undefined })).status).toBe(400);
    expect((await post(store, { ...verifyBody(), to: { region: 'mars' } })).status).toBe(400);
    expect(store.counters.verifications).toBe(0);
  });
});

describe('end notices (docs/design.md §6.11): clean up, never live data', () => {
  let host: LocalHost;
  let api: string;
  beforeAll(async () => {
    host = await startLocalHost({
      env: { PORT: '0' },
      store: new SqliteStore(':memory:'),
      log: () => undefined,
    });
    api = `${host.url}/api`;
  });
  afterAll(async () => {
    await host.close();
  });
  const send = (method: string, path: string, body?: unknown) =>
    fetch(`${api}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const route = async (id: string, region: string) =>
    expect((await send('PUT', `/routes/${id}`, { location: { region } })).ok).toBe(true);

  /** A store that copied `id` for m-1 from westeurope to eastus, its route at `routeAt`. */
  async function copiedFor(id: string, routeAt: string) {
    const store = await participant({ copyDelayMs: 5, routingUrl: api });
    store.stores.get('westeurope')?.put(id, 'msg-1', 'hello', 1);
    await route(id, routeAt);
    expect(
      (await settle((await post(store, contractBody({ resourceId: id }))).location as string)).status,
    ).toBe(200);
    return store;
  }
  const notice = (id: string, step: string, extra: Record<string, unknown> = {}) => ({
    migrationId: 'm-1',
    resourceId: id,
    from: FROM,
    to: TO,
    step,
    migrationAttempt: 1,
    stepAttempt: 1,
    attempt: 1,
    sequence: 9,
    lockAcquiredAt: LOCK_AT,
    ...extra,
  });
  const held = (store: MessageStore, region: string, id: string) => store.stores.get(region)?.list(id).length;

  test('completed: the source copy goes once cleanUpSourceAfter has passed, never before; a repeat is the same clean-up', async () => {
    const store = await copiedFor('done-1', 'eastus');
    const after = new Date(Date.now() + 600).toISOString();
    const first = await post(store, notice('done-1', 'completed', { cleanUpSourceAfter: after }));
    expect(first).toMatchObject({
      status: 200,
      body: { cleanUp: { state: 'scheduled', region: 'westeurope' } },
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(held(store, 'westeurope', 'done-1')).toBe(1);
    // the notice again (best effort: a retry), even with another time: one clean-up, the first time
    const again = await post(
      store,
      notice('done-1', 'completed', { cleanUpSourceAfter: new Date().toISOString() }),
    );
    expect(again.body).toMatchObject({ cleanUp: { state: 'scheduled' } });
    await new Promise((r) => setTimeout(r, 100));
    expect(held(store, 'westeurope', 'done-1')).toBe(1);
    await poll(
      async () => held(store, 'westeurope', 'done-1'),
      (n) => n === 0,
      5000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(after));
    expect(store.cleanUps.size).toBe(1);
    expect([...store.cleanUps.values()][0]).toMatchObject({ state: 'deleted', region: 'westeurope' });
    expect(held(store, 'eastus', 'done-1')).toBe(1);
  });

  test('completed while the route is at the source after all: the source is kept', async () => {
    const store = await copiedFor('done-2', 'westeurope');
    await post(store, notice('done-2', 'completed', { cleanUpSourceAfter: new Date().toISOString() }));
    await poll(
      async () => [...store.cleanUps.values()][0]?.state,
      (s) => s !== 'scheduled',
      5000,
    );
    expect([...store.cleanUps.values()][0]).toMatchObject({
      state: 'kept',
      why: 'westeurope is the live location',
    });
    expect(held(store, 'westeurope', 'done-2')).toBe(1);
  });

  test.each(['failed', 'cancelled'])(
    '%s: the target partial copy is dropped at once, the source kept',
    async (step) => {
      const store = await copiedFor(`end-${step}`, 'westeurope');
      expect(held(store, 'eastus', `end-${step}`)).toBe(1);
      const answer = await post(
        store,
        notice(`end-${step}`, step, { reason: 'the delta overran every attempt' }),
      );
      expect(answer).toMatchObject({
        status: 200,
        body: { cleanUp: { state: 'deleted', region: 'eastus' } },
      });
      expect(held(store, 'eastus', `end-${step}`)).toBe(0);
      expect(held(store, 'westeurope', `end-${step}`)).toBe(1);
    },
  );

  test('failed never deletes a target that is live (the route is there), nor one a lock is bringing the resource to', async () => {
    const live = await copiedFor('live-1', 'eastus');
    expect((await post(live, notice('live-1', 'failed'))).body).toMatchObject({
      cleanUp: { state: 'kept', why: 'eastus is the live location' },
    });
    expect(held(live, 'eastus', 'live-1')).toBe(1);
    const locked = await copiedFor('locked-1', 'westeurope');
    const pre = await send('POST', '/routes/locked-1/prelock', {
      migrationId: 'm-2',
      owner: 'o',
      target: TO,
    });
    expect(pre.ok).toBe(true);
    expect((await post(locked, notice('locked-1', 'cancelled'))).body).toMatchObject({
      cleanUp: { state: 'kept', why: 'a lock (m-2) targets eastus' },
    });
    expect(held(locked, 'eastus', 'locked-1')).toBe(1);
  });

  test("a failed notice stops the migration's running copy: it never lands after the drop", async () => {
    const store = await copiedFor('late-1', 'westeurope');
    store.stores.get('eastus')?.purge('late-1');
    const slow = await participant({ copyDelayMs: 300, routingUrl: api });
    slow.stores.get('westeurope')?.put('late-1', 'msg-1', 'hello', 1);
    const job = await post(slow, contractBody({ resourceId: 'late-1' }));
    expect(job.status).toBe(202);
    expect((await post(slow, notice('late-1', 'failed'))).body).toMatchObject({
      cleanUp: { state: 'deleted' },
    });
    await new Promise((r) => setTimeout(r, 450));
    expect(held(slow, 'eastus', 'late-1')).toBe(0);
    expect(slow.copies).toEqual([]);
  });

  test('a notice of a migration it never copied for is a 200 no-op; a malformed one a 400', async () => {
    const store = await copiedFor('other-1', 'westeurope');
    expect(await post(store, { ...notice('other-1', 'failed'), migrationId: 'm-unknown' })).toMatchObject({
      status: 200,
      body: { ignored: expect.any(String) },
    });
    expect(held(store, 'eastus', 'other-1')).toBe(1);
    expect((await post(store, notice('other-1', 'completed'))).status).toBe(400); // no cleanUpSourceAfter
    expect((await post(store, { ...notice('other-1', 'failed'), to: 'eastus' })).status).toBe(400);
    expect(store.cleanUps.size).toBe(0);
  });
});

describe('the pure rules (verification.ts, notices.ts)', () => {
  const row = (messageId: string, text = 't', updatedAt = 1, deleted = false) => ({
    conversationId: 'c',
    messageId,
    text,
    updatedAt,
    deleted,
  });

  test.each([
    ['the same rows in another order', [row('a'), row('b')], [row('b'), row('a')], true],
    [
      'a tombstone at the source, nothing at the target',
      [row('a'), row('b', 't', 2, true)],
      [row('a')],
      true,
    ],
    [
      'a tombstone at the target, nothing at the source',
      [row('a')],
      [row('a'), row('x', 't', 1, true)],
      true,
    ],
    ['a live row at the target the source tombstoned', [row('a', 't', 1, true)], [row('a')], false],
    ['the same id at another version', [row('a', 't', 2)], [row('a', 't', 1)], false],
  ])('compareRegions: %s', (_, source, target, match) => {
    expect(compareRegions(source, target).match).toBe(match);
  });

  test('the detail names at most three ids of a kind, and never a text', () => {
    const source = ['a', 'b', 'c', 'd', 'e'].map((id) => row(id, `secret-${id}`));
    const detail = compareRegions(source, []).detail ?? '';
    expect(detail).toMatch(/^5 missing at the target \(a, b, c, …\); source sha256:[0-9a-f]{12}…, target/);
    expect(detail).not.toMatch(/secret/);
  });

  const view = (region: string, lockTarget?: string) =>
    ({
      location: { region },
      lock: lockTarget ? { migrationId: 'm-9', target: { region: lockTarget } } : null,
    }) as unknown as RouteView;
  test.each([
    ['the route elsewhere, no lock', view('westeurope'), 'eastus', true],
    ['the route there', view('eastus'), 'eastus', false],
    ['a lock bringing it there', view('westeurope', 'eastus'), 'eastus', false],
    ['a lock towards elsewhere', view('westeurope', 'northeurope'), 'eastus', true],
    ['no route', null, 'eastus', false],
  ])('mayDeleteCopy: %s', (_, v, region, ok) => {
    expect(mayDeleteCopy(v, region).ok).toBe(ok);
  });
});
