import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import { parse, readJson, resourceId, startMigrationBody } from './http/validation';
import type { Services } from './services';

/** POST /api/migrations starts (or joins) a resource's migration; GET /api/migrations/{id} reads it. */

export async function startMigration(
  request: HttpRequest,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<HttpResponseInit> {
  const body = parse(startMigrationBody, await readJson(request), 'body');
  const started = await migrations(context).start(body);
  const statusUrl = `/api/migrations/${encodeURIComponent(started.migrationId)}`;
  return json(
    202,
    { migrationId: started.migrationId, instanceId: started.instanceId, statusUrl },
    { Location: statusUrl },
  );
}

export async function getMigration(
  request: HttpRequest,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<HttpResponseInit> {
  const migrationId = parse(resourceId, request.params.migrationId ?? '', 'migration id');
  return json(200, await migrations(context).status(migrationId));
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
];

registerHttp(migrationEndpoints);
