import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../functions/durable/service';
import { problemFromError, statusByCode } from '../functions/http/problem';
import { RoutingClient, RoutingServiceError } from '../shared/core/client';
import { ManualClock } from '../testkit/clock';
import { parseConfig } from '../shared/config';
import { RouteLockError, errorCodes, errorKind, problemCodes } from '../shared/core/errors';
import { migrationSettings } from '../shared/migration/workflow';
import { Router } from '../shared/core/router';
import { TokenKeyring } from '../shared/core/security/tokenKeys';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { SqliteMigrationState } from '../shared/migration/store/sqlite/migrations';

/**
 * The one table of error codes (shared/core/errors.ts): retriability and Retry-After are properties of the
 * code, and two conditions that are not an outage have codes of their own, not `StoreUnavailable`.
 */

test('retriable codes, written out: transient faults only', () => {
  const all = [...problemCodes, 'Unreachable' as const];
  expect(all.filter((code) => errorKind(code).retriable).sort()).toEqual([
    'AuthUnavailable',
    'OrchestrationStatusUnavailable',
    'PreconditionFailed',
    'StoreUnavailable',
    'Unreachable',
  ]);
  expect(new RouteLockError('StoreUnavailable', 'x').retriable).toBe(true);
  expect(new RouteLockError('Locked', 'x').retriable).toBe(false);
});

test('every code is listed once; the API never sends the client-side Unreachable', () => {
  expect(new Set(problemCodes).size).toBe(problemCodes.length);
  expect(errorCodes).toContain('MigrationInProgress');
  expect(statusByCode.MigrationInProgress).toBe(409);
  expect(Object.keys(statusByCode)).not.toContain('Unreachable');
  expect(errorCodes).not.toContain('PayloadTooLarge');
});

test('OrchestrationStatusUnavailable is 503 with Retry-After', () => {
  const res = problemFromError(
    new RouteLockError('OrchestrationStatusUnavailable', 'task hub', { retryAfterSeconds: 1 }),
  );
  expect(res.status).toBe(503);
  expect(res.headers).toMatchObject({ 'Retry-After': '1' });
  expect(JSON.parse(res.body as string)).toMatchObject({ code: 'OrchestrationStatusUnavailable' });
});

test('a task hub that does not answer is OrchestrationStatusUnavailable, not StoreUnavailable', async () => {
  const config = parseConfig({});
  const clock = new ManualClock();
  const router = new Router({ store: new SqliteStore(':memory:'), timing: config.timing, clock: clock.now });
  await router.createRoute('conv-x', { region: 'westeurope' });
  const client = {
    getStatus: () => Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:7071')),
  } as unknown as DurableClient;
  const service = new DurableMigrationService(
    client,
    new SqliteMigrationState(':memory:'),
    router,
    migrationSettings(config),
    clock.now,
    TokenKeyring.ephemeral(),
  );
  await expect(service.start({ resourceId: 'conv-x', target: { region: 'eastus' } })).rejects.toMatchObject({
    code: 'OrchestrationStatusUnavailable',
    retryAfterSeconds: 1,
  });
});

test('a routing service that cannot be reached is Unreachable (status 0, retry after 1 s)', async () => {
  const client = new RoutingClient({
    baseUrl: 'http://127.0.0.1:9/api',
    fetch: () => Promise.reject(new TypeError('fetch failed')),
  });
  const error: unknown = await client.resolve('conv-1').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ status: 0, code: 'Unreachable', retryAfterSeconds: 1 });
});

test('a routing service that does not answer within timeoutMs is Unreachable too (status 0), and says it timed out', async () => {
  const client = new RoutingClient({
    baseUrl: 'http://127.0.0.1:9/api',
    timeoutMs: 50,
    fetch: () => new Promise<Response>(() => undefined),
  });
  const error: unknown = await client.resolve('conv-1').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(RoutingServiceError);
  expect(error).toMatchObject({ status: 0, code: 'Unreachable', retryAfterSeconds: 1 });
  expect((error as Error).message).toMatch(/timed out/);
  // what a service passing it on answers: the table's status for the code
  expect(errorKind('Unreachable').status).toBe(503);
});
