import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { MessageStore, type MessageStoreOptions } from '../../examples/message-store/service';
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

test.each(['verify', 'notifyCutover'])(
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
