import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import type { Actor } from '../../shared/core/audit';
import { InProcessMigrationService } from '../../shared/migration/inProcessService';
import {
  type MigrationList,
  type MigrationListQuery,
  type MigrationService,
  type StartedMigration,
} from '../../shared/migration/service';
import { type MigrationStatus, migrationStates } from '../../shared/migration/types';
import { encodeContinuation } from '../../shared/core/store/continuation';
import { type Called, call, handlerServices } from '../support/handlers';
import { virtualRunner } from '../support/migrationHarness';
import { allRoles } from '../support/principals';

/**
 * GET /migrations, POST /migrations/{id}/cancel and /retry through the registered handlers (real
 * HttpRequest objects, App Service principals): roles, problem details naming the field, and what each
 * route hands its service.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const reader = { oid: '00000000-0000-4000-8000-00000000000a', name: 'dashboard', roles: ['Ops.Read'] };
const starter = { oid: '00000000-0000-4000-8000-00000000000b', roles: ['Migrations.Write'] };
const routesOnly = { oid: '00000000-0000-4000-8000-00000000000c', roles: ['Routes.Read', 'Routes.Write'] };

function expectProblem(res: Called, status: number, code: string, field?: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toMatchObject({ status, code, type: `urn:routelock:problem:${code}` });
  if (field !== undefined) {
    const errors = (res.body as { errors?: string[] }).errors ?? [];
    expect(errors.some((e) => e.startsWith(`${field}:`))).toBe(true);
  }
}

describe('on the in-process runner', () => {
  let h: ReturnType<typeof virtualRunner>;
  let service: InProcessMigrationService;

  beforeEach(async () => {
    h = virtualRunner();
    service = new InProcessMigrationService(h.runner, h.router);
    for (let i = 1; i <= 12; i += 1) {
      await h.router.createRoute(`r-${i}`, SOURCE);
      await service.start({ resourceId: `r-${i}`, target: TARGET });
      h.clock.advance(1000);
    }
    await h.settle();
    await handlerServices({}, undefined, { migrations: () => service });
  });

  test('GET /migrations pages newest first; the last page carries no continuation', async () => {
    const first = await call('listMigrations', { query: 'limit=5', principal: reader });
    expect(first.status).toBe(200);
    const page1 = first.body as MigrationList;
    expect(page1.items.map((s) => s.resourceId)).toEqual(['r-12', 'r-11', 'r-10', 'r-9', 'r-8']);
    const seen = [...page1.items];
    let continuation = page1.continuation;
    while (continuation !== undefined) {
      const next = await call('listMigrations', {
        query: `limit=5&continuation=${encodeURIComponent(continuation)}`,
        principal: reader,
      });
      const page = next.body as MigrationList;
      seen.push(...page.items);
      continuation = page.continuation;
      if (continuation === undefined) expect(next.text).not.toContain('continuation');
    }
    expect(seen.map((s) => s.resourceId)).toEqual(Array.from({ length: 12 }, (_, i) => `r-${12 - i}`));
    const filtered = await call('listMigrations', {
      query: 'status=Completed&resourceId=r-3',
      principal: reader,
    });
    expect((filtered.body as MigrationList).items.map((s) => [s.resourceId, s.status])).toEqual([
      ['r-3', 'Completed'],
    ]);
    const campaign = await call('listMigrations', { query: 'campaignId=camp-1', principal: reader });
    expect(campaign.body).toEqual({ items: [] });
  });

  test('bad input is a 400 naming the field', async () => {
    const cases: [string, string][] = [
      ['status=Bogus', 'status'],
      ['status=completed', 'status'],
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=ten', 'limit'],
      ['resourceId=has%20space', 'resourceId'],
      [`continuation=${encodeContinuation('["yesterday","m-1"]')}`, 'continuation'],
      ['continuation=%25%25tampered', 'continuation'],
      ['sort=createdAt', 'query'],
    ];
    for (const [query, field] of cases) {
      expectProblem(await call('listMigrations', { query, principal: reader }), 400, 'BadRequest', field);
    }
  });

  test('roles: the list is Ops.Read; cancel and retry are Migrations.Write (403 otherwise, 401 without an identity), and a refusal changes nothing', async () => {
    const before = await service.status('m-3');
    expectProblem(await call('listMigrations', { principal: routesOnly }), 403, 'Forbidden');
    expectProblem(await call('listMigrations', { principal: starter }), 403, 'Forbidden');
    expectProblem(await call('listMigrations', { principal: null }), 401, 'Unauthenticated');
    for (const name of ['cancelMigration', 'retryMigration']) {
      for (const principal of [reader, routesOnly]) {
        expectProblem(
          await call(name, { params: { migrationId: 'm-3' }, body: {}, principal }),
          403,
          'Forbidden',
        );
      }
      expectProblem(
        await call(name, { params: { migrationId: 'm-3' }, body: {}, principal: null }),
        401,
        'Unauthenticated',
      );
      // bad input, with the role: 400 naming what is wrong
      expectProblem(
        await call(name, { params: { migrationId: 'bad id!' }, body: {}, principal: starter }),
        400,
        'BadRequest',
        'migration id',
      );
      expectProblem(
        await call(name, { params: { migrationId: 'm-3' }, body: { force: true }, principal: starter }),
        400,
        'BadRequest',
        'body',
      );
      expectProblem(
        await call(name, { params: { migrationId: 'm-unknown' }, principal: starter }),
        404,
        'NotFound',
      );
    }
    expect(await service.status('m-3')).toEqual(before);
    expect((await call('listMigrations', { principal: reader })).status).toBe(200);
  });
});

/** A service that answers cancel and retry as the interface says and remembers who asked. */
class RecordingService implements MigrationService {
  calls: [string, string, Actor][] = [];
  readonly status_: MigrationStatus = {
    migrationId: 'm-9',
    resourceId: 'r-9',
    status: 'Cancelled',
    phase: 'released',
    target: TARGET,
    timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
  };
  async start(): Promise<StartedMigration> {
    throw new Error('not used');
  }
  async status(): Promise<MigrationStatus> {
    return this.status_;
  }
  async list(query: MigrationListQuery): Promise<MigrationList> {
    this.calls.push(['list', JSON.stringify(query), { id: '' }]);
    return { items: [this.status_] };
  }
  async cancel(migrationId: string, actor: Actor): Promise<MigrationStatus> {
    this.calls.push(['cancel', migrationId, actor]);
    return this.status_;
  }
  async retry(migrationId: string, actor: Actor): Promise<StartedMigration> {
    this.calls.push(['retry', migrationId, actor]);
    return { migrationId, instanceId: 'migrate-r-9', created: true };
  }
}

describe('what the routes hand their service and answer', () => {
  let service: RecordingService;
  beforeEach(async () => {
    service = new RecordingService();
    await handlerServices({}, undefined, { migrations: () => service });
  });

  test('cancel: 200 with the status, for the authenticated caller; an empty body is accepted', async () => {
    const res = await call('cancelMigration', { params: { migrationId: 'm-9' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual(service.status_);
    expect(service.calls).toEqual([['cancel', 'm-9', { id: allRoles.oid, name: allRoles.name }]]);
  });

  test('retry: 202 {migrationId, instanceId, statusUrl} with Location, as a start answers', async () => {
    const res = await call('retryMigration', {
      params: { migrationId: 'm-9' },
      body: {},
      principal: starter,
    });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      migrationId: 'm-9',
      instanceId: 'migrate-r-9',
      statusUrl: '/api/migrations/m-9',
    });
    expect(res.headers.get('location')).toBe('/api/migrations/m-9');
    expect(service.calls).toEqual([['retry', 'm-9', { id: starter.oid }]]);
  });

  test('the list passes the parsed query on: limit as a number, absent filters absent', async () => {
    await call('listMigrations', { query: 'status=Failed&limit=7&campaignId=c-1' });
    expect(service.calls.map((c) => JSON.parse(c[1]) as unknown)).toEqual([
      { status: 'Failed', limit: 7, campaignId: 'c-1' },
    ]);
  });
});

test("openapi.yaml's MigrationState is exactly the states a migration can be in (the list's status filter)", () => {
  const spec = parse(readFileSync(join(__dirname, '../../openapi.yaml'), 'utf8')) as {
    components: { schemas: { MigrationState: { enum: string[] } } };
  };
  expect(spec.components.schemas.MigrationState.enum).toEqual([...migrationStates]);
});
