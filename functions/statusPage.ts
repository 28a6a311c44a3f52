import type { HttpRequest, HttpResponseInit } from '@azure/functions';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { campaignEndpoints } from './campaigns';
import { type EndpointDeclaration, registerHttp } from './http/endpoint';
import { HttpProblem } from './http/problem';
import { signInLocation } from './http/signIn';
import { migrationEndpoints } from './migrations';
import {
  PAGE_PATH,
  PAGE_ROUTE,
  STATUS_PAGE_ICON,
  VIEW_ROUTE,
  contentSecurityPolicy,
  statusPageDocument,
} from './pages/statusPage';
import { routeEndpoints } from './routes';
import type { Services } from './services';

/**
 * The status page, on both hosts (docs/design.md §9, README "The status page"): `GET /api/status`, for
 * Ops.Read, and the routes it reads. A browser cannot hold a function key, so the page and its reads are
 * `authLevel: anonymous` — the caller's identity and role are what is checked, as on every endpoint. In
 * Azure the page's path is excluded from App Service authentication's 401, so a browser with no identity
 * reaches this handler's wrapper and is sent to sign in (functions/http/signIn.ts); the read routes are
 * not excluded: without the session cookie App Service answers them 401 itself, as it answers the API.
 *
 * The reads are the API's own declarations (same handler, role and bindings) under `ops/view/…`: one
 * home for each rule, and nothing a function key opens that the page could not already read as Ops.Read.
 */

/** The page. Its HTML holds no data and no credential (the reads fetch it); never cached. */
export async function statusPage(
  _request: HttpRequest,
  _context: unknown,
  { authenticator }: Pick<Services, 'authenticator'>,
): Promise<HttpResponseInit> {
  const signIn = authenticator.mode === 'appservice' ? signInLocation(PAGE_PATH) : undefined;
  return {
    status: 200,
    headers: {
      'Content-Type': 'text/html; charset=utf-8',
      'Cache-Control': 'no-store',
      'Content-Security-Policy': contentSecurityPolicy,
      'X-Content-Type-Options': 'nosniff',
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
    },
    body: statusPageDocument({ signIn }),
  };
}

/**
 * uPlot's files, from the installed package (a production dependency, so in the Azure package too), and
 * the page's icon (a browser asks for one; without it every load logs a 404).
 */
const assets: Record<string, { file: string; type: string } | { text: string; type: string }> = {
  'uplot-js': { file: 'uPlot.iife.min.js', type: 'text/javascript; charset=utf-8' },
  'uplot-css': { file: 'uPlot.min.css', type: 'text/css; charset=utf-8' },
  'favicon.svg': { text: STATUS_PAGE_ICON, type: 'image/svg+xml' },
};
const loaded = new Map<string, string>();

export async function statusPageAsset(request: HttpRequest): Promise<HttpResponseInit> {
  const name = request.params.file ?? '';
  const asset = Object.hasOwn(assets, name) ? assets[name] : undefined;
  if (!asset) throw new HttpProblem('NotFound', `No status page file ${name}.`);
  let text = 'text' in asset ? asset.text : loaded.get(name);
  if (text === undefined && 'file' in asset) {
    text = readFileSync(join(dirname(require.resolve('uplot/package.json')), 'dist', asset.file), 'utf8');
    loaded.set(name, text);
  }
  return {
    status: 200,
    headers: {
      'Content-Type': asset.type,
      'Cache-Control': 'private, max-age=3600',
      'X-Content-Type-Options': 'nosniff',
    },
    body: text,
  };
}

/** An API declaration the page reads, under `ops/view/…` and without a function key; nothing else changes. */
function pageRead(from: readonly EndpointDeclaration[], name: string, view: string): EndpointDeclaration {
  const api = from.find((e) => e.name === name);
  // Only reads an operator view may make: GET, for Ops.Read.
  if (!api || api.role !== 'Ops.Read' || api.methods.some((m) => m !== 'GET'))
    throw new Error(`the status page reads only GET endpoints for Ops.Read, not ${name}`);
  return {
    ...api,
    name: `view${name[0]!.toUpperCase()}${name.slice(1)}`,
    route: `${VIEW_ROUTE}/${view}`,
    authLevel: 'anonymous',
  };
}

export const statusPageEndpoints: EndpointDeclaration[] = [
  {
    name: 'statusPage',
    methods: ['GET'],
    route: PAGE_ROUTE,
    authLevel: 'anonymous',
    role: 'Ops.Read',
    handler: statusPage,
    browserSignIn: { returnTo: PAGE_PATH },
  },
  {
    name: 'statusPageAsset',
    methods: ['GET'],
    route: `${VIEW_ROUTE}/assets/{file}`,
    authLevel: 'anonymous',
    role: 'Ops.Read',
    handler: statusPageAsset,
  },
  pageRead(migrationEndpoints, 'listMigrations', 'migrations'),
  pageRead(routeEndpoints, 'listRoutes', 'routes'),
  pageRead(routeEndpoints, 'getAudit', 'routes/{id}/audit'),
  pageRead(campaignEndpoints, 'listCampaigns', 'campaigns'),
  pageRead(campaignEndpoints, 'getCampaign', 'campaigns/{campaignId}'),
];

registerHttp(statusPageEndpoints);
