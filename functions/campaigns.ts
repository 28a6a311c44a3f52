import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';
import { type CampaignPreflightDeps, runCampaignPreflight } from '../shared/campaign/preflight';
import type { CreatedCampaign } from '../shared/campaign/service';
import { migrationSettings } from '../shared/migration/workflow';
import { type Caller, actorOf } from './http/auth';
import { type EndpointDeclaration, json, registerHttp } from './http/endpoint';
import {
  addCampaignResourcesBody,
  campaignCommandBody,
  campaignId,
  campaignLimitsBody,
  campaignListQuery,
  namingContinuation,
  parse,
  queryObject,
  readJson,
  readOptionalJson,
  startCampaignBody,
} from './http/validation';
import type { Services } from './services';

/**
 * Campaigns (docs/design.md §6.9): POST /api/campaigns starts one (many resources to one target), GET reads
 * and lists them, POST …/{campaignId}/resources appends a page of ids, …/pause, …/resume and …/cancel
 * steer it, PATCH changes its limits while it runs. The rules live in the CampaignService; these only
 * parse the request and name the caller.
 */

type CampaignDeps = Pick<Services, 'campaigns'>;

/** Where a campaign's status is read. */
export const campaignStatusUrl = (id: string): string => `/api/campaigns/${encodeURIComponent(id)}`;

/** 202 with where to watch it: a new campaign and the one that stands (same id, same target) alike. */
export function acceptedCampaign(started: CreatedCampaign): HttpResponseInit {
  const statusUrl = campaignStatusUrl(started.campaignId);
  return json(
    202,
    { campaignId: started.campaignId, statusUrl, created: started.created },
    { Location: statusUrl },
  );
}

const campaignOf = (request: HttpRequest): string =>
  parse(campaignId, request.params.campaignId ?? '', 'campaign id');

/** The dry run's reads: the process's router, store, records and campaign records, the host's settings. */
function campaignPreflightDeps(services: DryRunServices): CampaignPreflightDeps {
  return {
    router: services.router,
    records: services.records,
    store: services.store,
    campaigns: services.campaignRecords,
    timing: services.config.timing,
    settings: migrationSettings(services.config),
    maxMigrationAttempts: services.config.migration.migrationAttempts,
    now: services.clock,
  };
}

type DryRunServices = Pick<Services, 'router' | 'records' | 'store' | 'campaignRecords' | 'config' | 'clock'>;

/**
 * POST /api/campaigns — 202; the same campaignId and target again answers the standing campaign. With
 * `dryRun: true`, 200 and a campaign preflight report: nothing written, on either runner alike.
 */
export async function startCampaign(
  request: HttpRequest,
  context: InvocationContext,
  services: CampaignDeps & DryRunServices,
  caller: Caller,
): Promise<HttpResponseInit> {
  const { dryRun, ...body } = parse(startCampaignBody, await readJson(request), 'body');
  if (dryRun === true) {
    const report = await runCampaignPreflight(campaignPreflightDeps(services), body);
    context.log(
      `campaign dry run: ${report.wouldStart} of ${report.resourceCount} would start, ${report.ok ? 'ok' : 'a check fails'}`,
    );
    return json(200, report);
  }
  return acceptedCampaign(await services.campaigns(context).create(body, actorOf(caller)));
}

export async function getCampaign(
  request: HttpRequest,
  context: InvocationContext,
  { campaigns }: CampaignDeps,
): Promise<HttpResponseInit> {
  return json(200, await campaigns(context).status(campaignOf(request)));
}

/** GET /api/campaigns?status=&limit=&continuation= — newest first, paged. */
export async function listCampaigns(
  request: HttpRequest,
  context: InvocationContext,
  { campaigns }: CampaignDeps,
): Promise<HttpResponseInit> {
  const query = parse(campaignListQuery, queryObject(request), 'query');
  return json(200, await namingContinuation(query.continuation, () => campaigns(context).list(query)));
}

/** POST /api/campaigns/{campaignId}/resources — 200 {added, duplicates, status}; one page of ≤ 1,000 ids. */
export async function addCampaignResources(
  request: HttpRequest,
  context: InvocationContext,
  { campaigns }: CampaignDeps,
  caller: Caller,
): Promise<HttpResponseInit> {
  const id = campaignOf(request);
  const { resources } = parse(addCampaignResourcesBody, await readJson(request), 'body');
  return json(200, await campaigns(context).addResources(id, resources, actorOf(caller)));
}

/** PATCH /api/campaigns/{campaignId} — new maxConcurrent and/or startsPerMinute; 200 with the status. */
export async function updateCampaign(
  request: HttpRequest,
  context: InvocationContext,
  { campaigns }: CampaignDeps,
  caller: Caller,
): Promise<HttpResponseInit> {
  const id = campaignOf(request);
  const patch = parse(campaignLimitsBody, await readJson(request), 'body');
  return json(200, await campaigns(context).update(id, patch, actorOf(caller)));
}

type Command = 'pause' | 'resume' | 'cancel';

/** POST /api/campaigns/{campaignId}/{command}: no fields (an empty body or `{}`); 200 with the status. */
function command(name: Command) {
  return async (
    request: HttpRequest,
    context: InvocationContext,
    { campaigns }: CampaignDeps,
    caller: Caller,
  ): Promise<HttpResponseInit> => {
    const id = campaignOf(request);
    parse(campaignCommandBody, await readOptionalJson(request), 'body');
    return json(200, await campaigns(context)[name](id, actorOf(caller)));
  };
}

/** Pause: nothing new starts; running migrations finish. */
export const pauseCampaign = command('pause');
export const resumeCampaign = command('resume');
/** Cancel: pending members never start and running migrations are cancelled. */
export const cancelCampaign = command('cancel');

export const campaignEndpoints: EndpointDeclaration[] = [
  {
    name: 'startCampaign',
    methods: ['POST'],
    route: 'campaigns',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: startCampaign,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'listCampaigns',
    methods: ['GET'],
    route: 'campaigns',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: listCampaigns,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'getCampaign',
    methods: ['GET'],
    route: 'campaigns/{campaignId}',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: getCampaign,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'updateCampaign',
    methods: ['PATCH'],
    route: 'campaigns/{campaignId}',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: updateCampaign,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'addCampaignResources',
    methods: ['POST'],
    route: 'campaigns/{campaignId}/resources',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: addCampaignResources,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'pauseCampaign',
    methods: ['POST'],
    route: 'campaigns/{campaignId}/pause',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: pauseCampaign,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'resumeCampaign',
    methods: ['POST'],
    route: 'campaigns/{campaignId}/resume',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: resumeCampaign,
    extraInputs: [df.input.durableClient()],
  },
  {
    name: 'cancelCampaign',
    methods: ['POST'],
    route: 'campaigns/{campaignId}/cancel',
    authLevel: 'function',
    role: 'Migrations.Write',
    handler: cancelCampaign,
    extraInputs: [df.input.durableClient()],
  },
];

registerHttp(campaignEndpoints);
