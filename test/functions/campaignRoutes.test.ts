import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import type { AddedResources } from '../../shared/campaign/service';
import { type CampaignStatus, MAX_CAMPAIGN_PAGES } from '../../shared/campaign/types';
import type { MigrationList } from '../../shared/migration/service';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { poll } from '../support/poll';
import { type TestPrincipal, allRoles, asPrincipal } from '../support/principals';

/**
 * The campaign routes (docs/design.md §6.9) over real HTTP on the embedded host: its router, the registered
 * handlers, the in-process campaign runner. Callers are App Service principals (ROUTELOCK_AUTH=
 * appservice), so the declared roles are enforced as in Azure.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const reader: TestPrincipal = { oid: '00000000-0000-4000-8000-00000000000a', roles: ['Ops.Read'] };
const starter: TestPrincipal = { oid: '00000000-0000-4000-8000-00000000000b', roles: ['Migrations.Write'] };

let host: LocalHost;

beforeAll(async () => {
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_AUTH: 'appservice' },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
});
afterAll(async () => {
  await host?.close();
});

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

/** One request as `principal` (default: every role); `body` a value (sent as JSON) or raw text. */
async function api(
  method: string,
  path: string,
  body?: unknown,
  principal: TestPrincipal | null = allRoles,
): Promise<Answer> {
  const headers: Record<string, string> = principal ? asPrincipal(principal) : {};
  let payload: string | undefined;
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  } else if (method === 'POST') {
    headers['content-type'] = 'application/json'; // the host asks every POST to declare JSON
  }
  const res = await fetch(`${host.url}/api/${path}`, { method, headers, body: payload });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? (JSON.parse(text) as unknown) : null };
}

const status = (a: Answer) => a.body as CampaignStatus;

function expectProblem(a: Answer, httpStatus: number, code: string, field?: string) {
  expect({ status: a.status, code: (a.body as { code?: string }).code }).toEqual({
    status: httpStatus,
    code,
  });
  expect(a.headers.get('content-type')).toBe('application/problem+json');
  if (field !== undefined) {
    const errors = (a.body as { errors?: string[] }).errors ?? [];
    expect({ field, errors }).toEqual({
      field,
      errors: expect.arrayContaining([expect.stringMatching(`^${field}:`)]),
    });
  }
}

let routes = 0;
/** Fresh routes at SOURCE (each test its own, so one test's migrations never meet another's). */
async function createRoutes(n: number): Promise<string[]> {
  const ids = Array.from({ length: n }, () => `conv-c${(routes += 1)}`);
  for (const id of ids) await host.services.router.createRoute(id, SOURCE);
  return ids;
}

/**
 * A campaign that stays Running for the test: one start a minute, so after its first start the rest
 * stay pending for 60 s.
 */
async function slowCampaign(campaignId: string, resources: string[]): Promise<CampaignStatus> {
  const res = await api('POST', 'campaigns', { campaignId, target: TARGET, resources, startsPerMinute: 1 });
  expect(res.status).toBe(202);
  return status(await api('GET', `campaigns/${campaignId}`));
}

/** Cancel and wait until it has ended (its started migration cancelled), so nothing runs on. */
async function endCampaign(campaignId: string): Promise<CampaignStatus> {
  await api('POST', `campaigns/${campaignId}/cancel`);
  return poll(
    async () => status(await api('GET', `campaigns/${campaignId}`)),
    (s) => s.status === 'Cancelled',
    30_000,
  );
}

const allCampaigns = async () => (await api('GET', 'campaigns?limit=1000')).body;

test('POST /campaigns: 202 {campaignId, statusUrl, created} with Location; the same id and target answers the standing campaign, another target is 409 CampaignExists', async () => {
  const ids = await createRoutes(3);
  const res = await api('POST', 'campaigns', {
    campaignId: 'c-create.1:ops@team',
    target: TARGET,
    resources: ids,
    startsPerMinute: 1,
  });
  expect(res.status).toBe(202);
  expect(res.body).toEqual({
    campaignId: 'c-create.1:ops@team',
    statusUrl: '/api/campaigns/c-create.1%3Aops%40team',
    created: true,
  });
  expect(res.headers.get('location')).toBe('/api/campaigns/c-create.1%3Aops%40team');

  const got = await api('GET', 'campaigns/c-create.1%3Aops%40team', undefined, reader);
  expect(got.status).toBe(200);
  expect(got.headers.get('cache-control')).toBe('no-store');
  expect(status(got)).toMatchObject({
    campaignId: 'c-create.1:ops@team',
    target: TARGET,
    limits: { maxConcurrent: 10, startsPerMinute: 1 },
    source: { kind: 'ids' },
    counts: { total: 3 },
  });
  expect(['Running', 'Completed']).toContain(status(got).status);

  const again = await api('POST', 'campaigns', {
    campaignId: 'c-create.1:ops@team',
    target: TARGET,
    resources: ids,
  });
  expect(again.status).toBe(202);
  expect(again.body).toMatchObject({ campaignId: 'c-create.1:ops@team', created: false });
  expectProblem(
    await api('POST', 'campaigns', { campaignId: 'c-create.1:ops@team', target: SOURCE, resources: ids }),
    409,
    'CampaignExists',
  );
  expect(status(await api('GET', 'campaigns/c-create.1%3Aops%40team')).counts.total).toBe(3);

  // without a campaignId one is made up, and the status is where Location says
  const unnamed = await api('POST', 'campaigns', { target: TARGET, resources: ['ghost-1'] });
  expect(unnamed.status).toBe(202);
  const { campaignId } = unnamed.body as { campaignId: string };
  expect(campaignId).toMatch(/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$/);
  expect((await api('GET', (unnamed.headers.get('location') ?? '').replace(/^\/api\//, ''))).status).toBe(
    200,
  );
  await endCampaign('c-create.1:ops@team');
}, 60_000);

test('GET /campaigns pages newest first, filters on status, and names a bad parameter', async () => {
  for (let i = 1; i <= 5; i += 1) {
    expect(
      (await api('POST', 'campaigns', { campaignId: `c-list-${i}`, target: TARGET, resources: ['ghost-x'] }))
        .status,
    ).toBe(202);
    await new Promise((r) => setTimeout(r, 5)); // distinct createdAt
  }
  const seen: string[] = [];
  let continuation: string | undefined;
  let pages = 0;
  do {
    const page = await api(
      'GET',
      `campaigns?limit=2${continuation ? `&continuation=${encodeURIComponent(continuation)}` : ''}`,
      undefined,
      reader,
    );
    expect(page.status).toBe(200);
    const body = page.body as { items: CampaignStatus[]; continuation?: string };
    expect(body.items.length).toBeLessThanOrEqual(2);
    seen.push(...body.items.map((s) => s.campaignId));
    continuation = body.continuation;
    pages += 1;
  } while (continuation !== undefined && pages < 100);
  const listed = seen.filter((id) => id.startsWith('c-list-'));
  expect(listed).toEqual(['c-list-5', 'c-list-4', 'c-list-3', 'c-list-2', 'c-list-1']);
  expect(new Set(seen).size).toBe(seen.length);

  // every member is a route that does not exist: skipped, so the campaigns complete
  await poll(
    async () => (await api('GET', 'campaigns/c-list-1')).body as CampaignStatus,
    (s) => s.status === 'Completed',
  );
  const completed = (await api('GET', 'campaigns?status=Completed&limit=1000')).body as {
    items: CampaignStatus[];
  };
  expect(completed.items.map((s) => s.campaignId)).toContain('c-list-1');
  expect(completed.items.every((s) => s.status === 'Completed')).toBe(true);
  const paused = (await api('GET', 'campaigns?status=Paused')).body as { items: CampaignStatus[] };
  expect(paused.items.every((s) => s.status === 'Paused')).toBe(true);

  for (const [query, field] of [
    ['status=Bogus', 'status'],
    ['status=running', 'status'],
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['continuation=%25%25tampered', 'continuation'],
    ['sort=createdAt', 'query'],
  ] as const) {
    expectProblem(await api('GET', `campaigns?${query}`), 400, 'BadRequest', field);
  }
}, 60_000);

test('POST …/resources appends a page: duplicates counted and kept once; over 1,000 ids a 400; an ended campaign 409 CampaignEnded', async () => {
  const ids = await createRoutes(3);
  await slowCampaign('c-append', [ids[0]!, ids[1]!]);
  const added = await api('POST', 'campaigns/c-append/resources', {
    resources: [ids[2]!, ids[1]!, ids[2]!, 'ghost-append'],
  });
  expect(added.status).toBe(200);
  const body = added.body as AddedResources;
  expect({ added: body.added, duplicates: body.duplicates, total: body.status.counts.total }).toEqual({
    added: 2,
    duplicates: 2,
    total: 4,
  });

  const before = status(await api('GET', 'campaigns/c-append'));
  const tooMany = Array.from({ length: 1001 }, (_, i) => `many-${i}`);
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: tooMany }),
    400,
    'BadRequest',
    'resources',
  );
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: [] }),
    400,
    'BadRequest',
    'resources',
  );
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: ['probe-x'] }),
    400,
    'BadRequest',
    'resources.0',
  );
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: ['ok'], priority: 1 }),
    400,
    'BadRequest',
    'body',
  );
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: ['x'] }, reader),
    403,
    'Forbidden',
  );
  expectProblem(await api('POST', 'campaigns/nope/resources', { resources: ['x'] }), 404, 'NotFound');
  expect(status(await api('GET', 'campaigns/c-append')).counts.total).toBe(before.counts.total);

  await endCampaign('c-append');
  expectProblem(
    await api('POST', 'campaigns/c-append/resources', { resources: ['late-1'] }),
    409,
    'CampaignEnded',
  );
  expect(status(await api('GET', 'campaigns/c-append')).counts.total).toBe(4);
}, 60_000);

test(`appends are not capped by pages (${MAX_CAMPAIGN_PAGES} and more), only by 100,000 resources`, async () => {
  // two real routes: one starts, the other stays pending, so the campaign runs on while pages are added
  await slowCampaign('c-full', await createRoutes(2));
  for (let page = 1; page <= MAX_CAMPAIGN_PAGES + 1; page += 1) {
    const res = await api('POST', 'campaigns/c-full/resources', { resources: [`full-${page}`] });
    expect({ page, status: res.status }).toEqual({ page, status: 200 });
  }
  expect(status(await api('GET', 'campaigns/c-full')).counts.total).toBe(MAX_CAMPAIGN_PAGES + 3);
  // the 100,000 cap itself (409 CampaignFull, nothing added): test/campaign/campaigns.test.ts
  await endCampaign('c-full');
}, 60_000);

test('pause, resume, cancel: 200 with the status, for the authenticated caller; an empty body or {} only', async () => {
  const ids = await createRoutes(3);
  await slowCampaign('c-steer', ids);
  const paused = await api('POST', 'campaigns/c-steer/pause', undefined, starter);
  expect(paused.status).toBe(200);
  expect(status(paused)).toMatchObject({ campaignId: 'c-steer', status: 'Paused' });
  expect(status(paused).pausedAt).toEqual(expect.any(String));
  expectProblem(await api('POST', 'campaigns/c-steer/resume', { now: true }), 400, 'BadRequest', 'body');
  expect(status(await api('GET', 'campaigns/c-steer')).status).toBe('Paused');

  const resumed = await api('POST', 'campaigns/c-steer/resume', {}, starter);
  expect(resumed.status).toBe(200);
  expect(status(resumed).status).toBe('Running');

  const cancelled = await api('POST', 'campaigns/c-steer/cancel', {}, starter);
  expect(cancelled.status).toBe(200);
  expect(['Cancelling', 'Cancelled']).toContain(status(cancelled).status);
  expect(status(cancelled).cancelRequestedBy).toBe(starter.oid);
  const ended = await poll(
    async () => status(await api('GET', 'campaigns/c-steer')),
    (s) => s.status === 'Cancelled',
    30_000,
  );
  expect(ended.counts.pending).toBe(0);
  expect(ended.counts.running).toBe(0);
  expectProblem(await api('POST', 'campaigns/c-steer/pause'), 409, 'CampaignEnded');
  expectProblem(await api('POST', 'campaigns/nope/pause'), 404, 'NotFound');
  expectProblem(await api('POST', 'campaigns/bad%20id/cancel'), 400, 'BadRequest', 'campaign id');
}, 60_000);

test('PATCH /campaigns/{id}: new limits (startsPerMinute null removes the rate); bad limits are 400s naming the field and change nothing', async () => {
  const ids = await createRoutes(2);
  await slowCampaign('c-limits', ids);
  const patched = await api('PATCH', 'campaigns/c-limits', { maxConcurrent: 5 }, starter);
  expect(patched.status).toBe(200);
  expect(status(patched).limits).toEqual({ maxConcurrent: 5, startsPerMinute: 1 });

  for (const [body, field] of [
    [{}, 'body'],
    [{ maxConcurrent: 0 }, 'maxConcurrent'],
    [{ maxConcurrent: 10_001 }, 'maxConcurrent'],
    [{ maxConcurrent: 2.5 }, 'maxConcurrent'],
    [{ startsPerMinute: 0 }, 'startsPerMinute'],
    [{ startsPerMinute: '10' }, 'startsPerMinute'],
    [{ maxConcurrent: 3, migrationAttempts: 2 }, 'body'],
  ] as const) {
    expectProblem(await api('PATCH', 'campaigns/c-limits', body), 400, 'BadRequest', field);
  }
  expectProblem(await api('PATCH', 'campaigns/c-limits', { maxConcurrent: 3 }, reader), 403, 'Forbidden');
  expect(status(await api('GET', 'campaigns/c-limits')).limits).toEqual({
    maxConcurrent: 5,
    startsPerMinute: 1,
  });

  const unlimited = await api('PATCH', 'campaigns/c-limits', { startsPerMinute: null });
  expect(unlimited.status).toBe(200);
  expect(status(unlimited).limits).toEqual({ maxConcurrent: 5 });
  expectProblem(await api('PATCH', 'campaigns/nope', { maxConcurrent: 3 }), 404, 'NotFound');
  await endCampaign('c-limits');
}, 60_000);

test('bad POST /campaigns bodies are 400s naming the field, and create nothing', async () => {
  const before = await allCampaigns();
  const long = 'c'.repeat(201);
  const cases: [unknown, string][] = [
    [{ resources: ['r-1'] }, 'target'],
    [{ target: { region: 'East US' }, resources: ['r-1'] }, 'target.region'],
    [{ target: TARGET }, 'resources'],
    [{ target: TARGET, resources: ['r-1'], from: { region: 'westeurope' } }, 'resources'],
    [{ target: TARGET, resources: [] }, 'resources'],
    [{ target: TARGET, resources: Array.from({ length: 1001 }, (_, i) => `r-${i}`) }, 'resources'],
    [{ target: TARGET, resources: ['has space'] }, 'resources.0'],
    [{ target: TARGET, resources: ['PROBE-1'] }, 'resources.0'],
    [{ target: TARGET, from: { region: 'westeurope', limit: 0 } }, 'from.limit'],
    [{ target: TARGET, from: { region: 'westeurope', limit: 100_001 } }, 'from.limit'],
    [{ target: TARGET, from: { region: 'westeurope', all: true } }, 'from'],
    [{ campaignId: long, target: TARGET, resources: ['r-1'] }, 'campaignId'],
    [{ campaignId: '-dash', target: TARGET, resources: ['r-1'] }, 'campaignId'],
    [{ target: TARGET, resources: ['r-1'], maxConcurrent: 0 }, 'maxConcurrent'],
    [{ target: TARGET, resources: ['r-1'], maxConcurrent: 10_001 }, 'maxConcurrent'],
    [{ target: TARGET, resources: ['r-1'], startsPerMinute: 100_001 }, 'startsPerMinute'],
    [{ target: TARGET, resources: ['r-1'], migrationAttempts: 11 }, 'migrationAttempts'],
    [{ target: TARGET, resources: ['r-1'], migrationAttempts: 0 }, 'migrationAttempts'],
    [{ target: TARGET, resources: ['r-1'], priority: 'high' }, 'body'],
  ];
  for (const [body, field] of cases) {
    expectProblem(await api('POST', 'campaigns', body), 400, 'BadRequest', field);
  }
  expectProblem(await api('POST', 'campaigns', 'not json'), 400, 'BadRequest');
  expectProblem(await api('POST', 'campaigns', '[]'), 400, 'BadRequest');
  expect(await allCampaigns()).toEqual(before);
});

test('the 64 KiB body cap: 1,000 ids of 62 characters fit, of 64 characters they are 413 (and a 200-character campaignId still fits)', async () => {
  const id = (i: number, length: number) => `cap-${String(i).padStart(4, '0')}`.padEnd(length, 'x');
  const fits = {
    campaignId: 'c'.repeat(200),
    target: TARGET,
    resources: Array.from({ length: 1000 }, (_, i) => id(i, 62)),
    maxConcurrent: 10_000,
    startsPerMinute: 1,
    migrationAttempts: 1,
  };
  expect(Buffer.byteLength(JSON.stringify(fits))).toBeLessThanOrEqual(64 * 1024);
  const res = await api('POST', 'campaigns', fits);
  expect(res.status).toBe(202);
  expect(status(await api('GET', `campaigns/${'c'.repeat(200)}`)).counts.total).toBe(1000);
  const tooBig = { target: TARGET, resources: Array.from({ length: 1000 }, (_, i) => id(i, 64)) };
  expectProblem(await api('POST', 'campaigns', tooBig), 413, 'PayloadTooLarge');
  await endCampaign('c'.repeat(200));
}, 60_000);

test('roles: reads are Ops.Read, every change Migrations.Write (403 otherwise, 401 without an identity), and a refusal changes nothing', async () => {
  const before = await allCampaigns();
  const create = { campaignId: 'c-roles', target: TARGET, resources: ['ghost-r'] };
  expectProblem(await api('POST', 'campaigns', create, reader), 403, 'Forbidden');
  expectProblem(await api('POST', 'campaigns', create, null), 401, 'Unauthenticated');
  expectProblem(await api('GET', 'campaigns', undefined, starter), 403, 'Forbidden');
  expectProblem(await api('GET', 'campaigns/c-list-1', undefined, starter), 403, 'Forbidden');
  expectProblem(await api('GET', 'campaigns/c-list-1', undefined, null), 401, 'Unauthenticated');
  for (const command of ['pause', 'resume', 'cancel']) {
    expectProblem(await api('POST', `campaigns/c-list-1/${command}`, {}, reader), 403, 'Forbidden');
  }
  expect(await allCampaigns()).toEqual(before);
  expect((await api('GET', 'campaigns', undefined, reader)).status).toBe(200);
});

test("the host's router resolves the campaign routes as the Functions host does: one segment is the campaign, two a command; a wrong method is 405 with Allow", async () => {
  const wrong = await api('GET', 'campaigns/c-list-1/resources');
  expectProblem(wrong, 405, 'MethodNotAllowed');
  expect(wrong.headers.get('allow')).toBe('POST');
  const patchList = await api('PATCH', 'campaigns', { maxConcurrent: 1 });
  expectProblem(patchList, 405, 'MethodNotAllowed');
  expect(patchList.headers.get('allow')).toBe('POST, GET');
  expect((await api('DELETE', 'campaigns/c-list-1')).headers.get('allow')).toBe('GET, PATCH');
  // a campaign named like a command is a campaign
  expectProblem(await api('GET', 'campaigns/pause'), 404, 'NotFound');
  expectProblem(await api('GET', 'campaigns/c-list-1/pause/now'), 404, 'NotFound');
  expectProblem(await api('GET', 'campaigns/unknown'), 404, 'NotFound');
});

test('a campaign of lock-only resources runs to Completed on the embedded host (dev timing): every route at the target, its migrations listed by campaignId', async () => {
  const ids = await createRoutes(4);
  const started = Date.now();
  const res = await api('POST', 'campaigns', {
    campaignId: 'c-run',
    target: TARGET,
    resources: ids,
    maxConcurrent: 2,
  });
  expect(res.status).toBe(202);
  let mostRunning = 0;
  const done = await poll(
    async () => {
      const s = status(await api('GET', 'campaigns/c-run'));
      mostRunning = Math.max(mostRunning, s.counts.running);
      return s;
    },
    (s) => s.status === 'Completed',
    90_000,
  );
  const seconds = (Date.now() - started) / 1000;
  expect(done.counts).toMatchObject({ total: 4, completed: 4, pending: 0, running: 0, failed: 0 });
  expect(mostRunning).toBeLessThanOrEqual(2);
  expect(done.writeLockSeconds).toEqual({ p50: expect.any(Number), p99: expect.any(Number) });
  expect(done.endedAt).toEqual(expect.any(String));
  // no credential in a campaign's status: no fencing token, no lock seed (its migrations held real locks)
  expect(JSON.stringify(done)).not.toMatch(/token|seed/i);
  for (const id of ids) {
    const route = await host.services.router.readAuthoritative(id);
    expect({ id, location: route.doc.location, lock: route.doc.lock }).toEqual({
      id,
      location: TARGET,
      lock: null,
    });
  }
  const listed = (await api('GET', `migrations?campaignId=c-run`)).body as MigrationList;
  expect(listed.items.map((m) => m.resourceId).sort()).toEqual([...ids].sort());
  expect(listed.items.every((m) => m.status === 'Completed')).toBe(true);
  // for the report: how long four lock-only migrations, two at a time, take under dev timing
  process.stdout.write(`campaign c-run: 4 lock-only resources Completed in ${seconds.toFixed(1)} s\n`);
}, 120_000);
