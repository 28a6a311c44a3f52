import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { assertRetryOutsideCampaign } from '../shared/campaign/campaigns';
import { type PreflightDeps, runPreflight } from '../shared/migration/preflight';
import type { StartedMigration } from '../shared/migration/service';
import { migrationSettings } from '../shared/migration/workflow';
import { type Caller, actorOf } from './http/auth';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import {
  migrationCommandBody,
  migrationListQuery,
  namingContinuation,
  parse,
  queryObject,
  readJson,
  readOptionalJson,
  resourceId,
  startMigrationBody,
} from './http/validation';
import type { Services } from './services';

/**
 * POST /api/migrations starts (or joins) a resource's migration; GET /api/migrations/{id} reads it,
 * GET /api/migrations lists them; POST …/{id}/cancel stops one and POST …/{id}/retry starts a new
 * attempt of a failed one.
 */

/** 202 with where to watch it: a start and a retry answer alike. */
function accepted(started: StartedMigration) {
  const statusUrl = `/api/migrations/${encodeURIComponent(started.migrationId)}`;
  return json(
    202,
    { migrationId: started.migrationId, instanceId: started.instanceId, statusUrl },
    { Location: statusUrl },
  );
}

/** The dry run's reads: the process's router and records, the host's settings. */
function preflightDeps(services: Pick<Services, 'router' | 'records' | 'config' | 'clock'>): PreflightDeps {
  return {
    router: services.router,
    records: services.records,
    timing: services.config.timing,
    settings: migrationSettings(services.config),
    now: services.clock,
  };
}

/** POST /api/migrations — 202 and a started (or joined) migration; with `dryRun: true`, 200 and a report. */
export async function startMigration(
  request: HttpRequest,
  context: InvocationContext,
  services: Pick<Services, 'migrations' | 'router' | 'records' | 'config' | 'clock'>,
): Promise<HttpResponseInit> {
  const { dryRun, ...body } = parse(startMigrationBody, await readJson(request), 'body');
  // a dry run writes nothing and answers on either runner alike, so it never reaches a MigrationService
  if (dryRun === true) {
    const report = await runPreflight(preflightDeps(services), body);
    context.log(`dry run of ${body.resourceId}: ${report.ok ? 'ok' : 'a check fails'}`);
    return json(200, report);
  }
  return accepted(await services.migrations(context).start(body));
}

export async function getMigration(
  request: HttpRequest,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<HttpResponseInit> {
  const migrationId = parse(resourceId, request.params.migrationId ?? '', 'migration id');
  return json(200, await migrations(context).status(migrationId));
}

/** GET /api/migrations?status=&resourceId=&campaignId=&limit=&continuation= — newest first, paged. */
export async function listMigrations(
  request: HttpRequest,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<HttpResponseInit> {
  const query = parse(migrationListQuery, queryObject(request), 'query');
  return json(200, await namingContinuation(query.continuation, () => migrations(context).list(query)));
}

/** The migration a command names, and its body: none, or `{}` (unknown fields are refused). */
async function commandTarget(request: HttpRequest): Promise<string> {
  const migrationId = parse(resourceId, request.params.migrationId ?? '', 'migration id');
  parse(migrationCommandBody, await readOptionalJson(request), 'body');
  return migrationId;
}

/** POST /api/migrations/{id}/cancel — 200 with the status; 409 AlreadySwapped after the swap. */
export async function cancelMigration(
  request: HttpRequest,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
  caller: Caller,
): Promise<HttpResponseInit> {
  const migrationId = await commandTarget(request);
  return json(200, await migrations(context).cancel(migrationId, actorOf(caller)));
}

/**
 * POST /api/migrations/{id}/retry — 202 as a start; 409 MigrationNotRetriable unless it ended Failed,
 * and while the campaign it belongs to has not ended.
 */
export async function retryMigration(
  request: HttpRequest,
  context: InvocationContext,
  { migrations, records, campaigns }: Pick<Services, 'migrations' | 'records' | 'campaigns'>,
  caller: Caller,
): Promise<HttpResponseInit> {
  const migrationId = await commandTarget(request);
  await assertRetryOutsideCampaign(await records.get(migrationId), () => campaigns(context));
  return accepted(await migrations(context).retry(migrationId, actorOf(caller)));
}

export const migrationEndpoints: EndpointDeclaration[] = [
  {
    name: 'startMigration',
    methods: ['POST'],
    route: 'migrations',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: startMigration,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'getMigration',
    methods: ['GET'],
    route: 'migrations/{migrationId}',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: getMigration,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'listMigrations',
    methods: ['GET'],
    route: 'migrations',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: listMigrations,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'cancelMigration',
    methods: ['POST'],
    route: 'migrations/{migrationId}/cancel',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: cancelMigration,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'retryMigration',
    methods: ['POST'],
    route: 'migrations/{migrationId}/retry',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: retryMigration,
    extraInputs: [df.input.durableClient()],
  },
];

registerHttp(migrationEndpoints);
