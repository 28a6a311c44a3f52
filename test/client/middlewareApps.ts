import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import type { RouteResolver } from '../../shared/core/client';
import {
  type GuardTarget,
  type RouteGuard,
  type RouteGuardOptions,
  type Serving,
  routeGuard,
} from '../../shared/core/clientMiddleware';
import type { Location } from '../../shared/core/lock/document';

/**
 * One small item service on each of the three frameworks the guard adapts to (node:http, Express 5,
 * Fastify 5), the real ones: `GET|POST|DELETE /items/:id` guarded (read, write, delete), `GET /health`
 * not. The write handler awaits `gate` before committing, then asks `guard.commitOk(req)` unless it is
 * the careless build, the negative control that commits whatever the grace says.
 */

export type Framework = 'node' | 'express' | 'fastify';
export const frameworks: Framework[] = ['node', 'express', 'fastify'];

export interface AppSpec {
  routing: RouteResolver;
  /** Where the service serves from (default `westeurope`); a function: per request. */
  serving?: Serving | ((path: string) => Serving);
  clock?: () => number;
  /** The URL at another location (307); without one, 421. */
  urlFor?: (location: Location, path: string) => string | undefined;
  /** Awaited by the write handler between the guard and its commit (slow preparation). */
  gate?: () => Promise<void>;
  /** The negative control: a write handler that never asks `commitOk`. */
  careless?: boolean;
}

/** What the service did: its items, and each commit with the instant it landed. */
export interface AppState {
  items: Map<string, string>;
  commits: { id: string; at: number }[];
  tombstones: string[];
  /** Requests that reached a handler (the guard let them through). */
  handled: string[];
}

export interface RunningApp extends AppState {
  url: string;
  close(): Promise<void>;
}

/** A mapping as a team writes one; `throw` and `bad id` stand for requests it cannot map. */
export function targetOf(id: string, method: string | undefined): GuardTarget | undefined {
  if (id === 'throw') throw new Error('no resource in this request');
  if (id === 'public') return undefined;
  const operation = method === 'GET' ? 'read' : method === 'POST' ? 'write' : 'delete';
  return { resourceId: id, operation };
}

function guardFor<Req extends object>(
  spec: AppSpec,
  state: AppState,
  target: (req: Req) => GuardTarget | undefined,
  path: (req: Req) => string,
): RouteGuard<Req> {
  const { serving = 'westeurope', urlFor } = spec;
  const options: RouteGuardOptions<Req> = {
    routing: spec.routing,
    serving: typeof serving === 'function' ? (req) => serving(path(req)) : serving,
    target,
    tombstone: (req) => {
      const id = (target(req) as GuardTarget).resourceId;
      state.items.set(id, 'tombstone');
      state.tombstones.push(id);
    },
    ...(urlFor ? { urlFor: (location: Location, req: Req) => urlFor(location, path(req)) } : {}),
    ...(spec.clock ? { clock: spec.clock } : {}),
  };
  return routeGuard(options);
}

const newState = (): AppState => ({ items: new Map(), commits: [], tombstones: [], handled: [] });

/** The write's commit: after the gate, and (unless careless) only if the grace still holds. */
async function commitWrite(spec: AppSpec, state: AppState, id: string, commitOk: () => boolean) {
  await spec.gate?.();
  if (!spec.careless && !commitOk()) return false;
  state.items.set(id, 'written');
  state.commits.push({ id, at: (spec.clock ?? Date.now)() });
  return true;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

async function nodeApp(spec: AppSpec): Promise<RunningApp> {
  const state = newState();
  const idOf = (req: IncomingMessage) =>
    decodeURIComponent(/\/items\/([^/?]+)/.exec(req.url ?? '')?.[1] ?? 'public');
  const guard = guardFor<IncomingMessage>(
    spec,
    state,
    (req) => (req.url?.startsWith('/health') ? undefined : targetOf(idOf(req), req.method)),
    (req) => req.url ?? '/',
  );
  const json = (res: ServerResponse, status: number, body?: unknown) =>
    res
      .writeHead(status, { 'content-type': 'application/json' })
      .end(body === undefined ? '' : JSON.stringify(body));
  const server = createServer(
    guard.node(async (req, res) => {
      const id = idOf(req);
      state.handled.push(`${req.method} ${id}`);
      if (req.url?.startsWith('/health') || req.method === 'GET')
        return json(res, 200, { id, value: state.items.get(id) ?? null });
      if (req.method === 'POST') {
        if (!(await commitWrite(spec, state, id, () => guard.commitOk(req)))) return guard.late(res, req);
        return json(res, 201, { id });
      }
      state.items.delete(id);
      return json(res, 204);
    }),
  );
  return { ...state, url: await listen(server), close: () => closeServer(server) };
}

async function expressApp(spec: AppSpec): Promise<RunningApp> {
  const state = newState();
  const app = express();
  const guard = guardFor<express.Request>(
    spec,
    state,
    (req) => targetOf(String(req.params.id), req.method),
    (req) => req.originalUrl,
  );
  app.get('/health', (_req, res) => void res.json({ ok: true }));
  const idOf = (req: express.Request) => String(req.params.id);
  app.get('/items/:id', guard.express(), (req, res) => {
    state.handled.push(`GET ${idOf(req)}`);
    res.json({ id: idOf(req), value: state.items.get(idOf(req)) ?? null });
  });
  app.post('/items/:id', guard.express(), async (req, res) => {
    state.handled.push(`POST ${idOf(req)}`);
    if (!(await commitWrite(spec, state, idOf(req), () => guard.commitOk(req)))) return guard.late(res, req);
    res.status(201).json({ id: idOf(req) });
  });
  app.delete('/items/:id', guard.express(), (req, res) => {
    state.handled.push(`DELETE ${idOf(req)}`);
    state.items.delete(idOf(req));
    res.status(204).end();
  });
  const server = createServer(app);
  return { ...state, url: await listen(server), close: () => closeServer(server) };
}

async function fastifyApp(spec: AppSpec): Promise<RunningApp> {
  const state = newState();
  const app = Fastify();
  const idOf = (request: FastifyRequest) => (request.params as { id: string }).id;
  const guard = guardFor<FastifyRequest>(
    spec,
    state,
    (request) => targetOf(idOf(request), request.method),
    (request) => request.url,
  );
  const preHandler = guard.fastify();
  app.get('/health', async () => ({ ok: true }));
  app.get('/items/:id', { preHandler }, async (request) => {
    state.handled.push(`GET ${idOf(request)}`);
    return { id: idOf(request), value: state.items.get(idOf(request)) ?? null };
  });
  app.post('/items/:id', { preHandler }, async (request, reply) => {
    state.handled.push(`POST ${idOf(request)}`);
    if (!(await commitWrite(spec, state, idOf(request), () => guard.commitOk(request)))) {
      guard.late(reply, request);
      return reply;
    }
    return reply.code(201).send({ id: idOf(request) });
  });
  app.delete('/items/:id', { preHandler }, async (request, reply) => {
    state.handled.push(`DELETE ${idOf(request)}`);
    state.items.delete(idOf(request));
    return reply.code(204).send();
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { ...state, url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

export function startApp(framework: Framework, spec: AppSpec): Promise<RunningApp> {
  if (framework === 'node') return nodeApp(spec);
  if (framework === 'express') return expressApp(spec);
  return fastifyApp(spec);
}

/** One request, its answer read whole: status, the headers a test looks at, and the body as JSON. */
export async function call(
  url: string,
  method: 'GET' | 'POST' | 'DELETE',
): Promise<{ status: number; headers: Record<string, string | null>; body: Record<string, unknown> | null }> {
  const res = await fetch(url, { method, redirect: 'manual' });
  const text = await res.text();
  return {
    status: res.status,
    headers: {
      'retry-after': res.headers.get('retry-after'),
      location: res.headers.get('location'),
      'content-type': res.headers.get('content-type'),
    },
    body: text ? (JSON.parse(text) as Record<string, unknown>) : null,
  };
}
