import { type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import { type HttpEndpoint, handle, json, registerHttp } from './http/endpoint';
import {
  escalateBody,
  idempotencyKey,
  ifMatch,
  parse,
  prelockBody,
  quoteEtag,
  readJson,
  releaseBody,
  renewBody,
  routeId,
  swapBody,
} from './http/validation';
import type { Services } from './services';

/**
 * The lock API (DESIGN §4). Every call is one conditional write through the router. The token travels
 * in request bodies and only in the pre-lock grant's response body: never in a header, a view or a log.
 */

export async function prelock(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(prelockBody, await readJson(request), 'body');
  const keyHeader = request.headers.get('idempotency-key');
  const key = keyHeader === null ? undefined : parse(idempotencyKey, keyHeader, 'Idempotency-Key header');
  const grant = await router.prelock(
    id,
    { ...body, ...(key === undefined ? {} : { idempotencyKey: key }) },
    { ifMatch: ifMatch(request) },
  );
  return json(200, grant, { ETag: quoteEtag(grant.etag) });
}

export async function escalate(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(escalateBody, await readJson(request), 'body');
  const grant = await router.escalate(id, body, { ifMatch: ifMatch(request) });
  return json(200, grant, { ETag: quoteEtag(grant.etag) });
}

export async function renew(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(renewBody, await readJson(request), 'body');
  const grant = await router.renew(id, body, { ifMatch: ifMatch(request) });
  return json(200, grant, { ETag: quoteEtag(grant.etag) });
}

export async function swap(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(swapBody, await readJson(request), 'body');
  const view = await router.swap(id, body, { ifMatch: ifMatch(request) });
  return json(200, view, { ETag: quoteEtag(view.etag) });
}

export async function release(
  request: HttpRequest,
  _context: InvocationContext,
  { router }: Services,
): Promise<HttpResponseInit> {
  const id = routeId(request);
  const body = parse(releaseBody, await readJson(request), 'body');
  const view = await router.release(id, body, { ifMatch: ifMatch(request) });
  return json(200, view, { ETag: quoteEtag(view.etag) });
}

const lock = (name: string, handler: Parameters<typeof handle>[0]): HttpEndpoint => ({
  name,
  methods: ['POST'],
  route: `routes/{id}/${name}`,
  authLevel: 'function',
  handler: handle(handler),
});

export const lockEndpoints: HttpEndpoint[] = [
  lock('prelock', prelock),
  lock('escalate', escalate),
  lock('renew', renew),
  lock('swap', swap),
  lock('release', release),
];

registerHttp(lockEndpoints);
