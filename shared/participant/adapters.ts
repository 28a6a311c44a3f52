import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ParticipantHandler, ParticipantHttpAnswer } from './handler';

/**
 * The handler on node:http, Express and Fastify. The frameworks are typed structurally (what the
 * adapter touches, nothing more), so the package depends on neither.
 */

/** The largest body a job's POST may have: a job is a few hundred bytes. */
const MAX_BODY_BYTES = 64 * 1024;

class BodyTooLarge extends Error {}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.destroy();
        reject(new BodyTooLarge());
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, answer: ParticipantHttpAnswer): void {
  res
    .writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers })
    .end(JSON.stringify(answer.body ?? null));
}

const originOf = (req: IncomingMessage) =>
  `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}`;

/**
 * node:http: answers the participant's requests and returns true, or returns false for any other request
 * (the caller's own routes). The body is read only once the caller is authenticated; `body` is a body a
 * framework already parsed.
 */
export async function handleNodeRequest(
  participant: ParticipantHandler,
  req: IncomingMessage & { body?: unknown },
  res: ServerResponse,
): Promise<boolean> {
  const url = req.url ?? '/';
  const method = req.method ?? 'GET';
  if (!participant.handles(method, new URL(url, 'http://localhost').pathname)) return false;
  let tooLarge = false;
  try {
    const answer = await participant.answer({
      method,
      url,
      headers: req.headers,
      origin: originOf(req),
      ...(req.socket.remoteAddress === undefined ? {} : { remoteAddress: req.socket.remoteAddress }),
      ...(req.body !== undefined ? { body: req.body } : { readBody: () => readBody(req) }),
    });
    send(res, answer);
  } catch (error) {
    tooLarge = error instanceof BodyTooLarge;
    if (!res.headersSent)
      send(res, {
        status: tooLarge ? 413 : 500,
        headers: {},
        body: { error: tooLarge ? 'body too large' : (error as Error).message },
      });
  }
  return true;
}

/** A node:http request listener serving only the participant (404 to anything else). */
export function nodeListener(participant: ParticipantHandler) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    void handleNodeRequest(participant, req, res).then((handled) => {
      if (!handled) send(res, { status: 404, headers: {}, body: { error: 'not found' } });
    });
  };
}

/**
 * Express (4 or 5) middleware: `app.use(expressParticipant(participant))`, before or after
 * `express.json()` (a parsed `req.body` is used as it is).
 */
export function expressParticipant(participant: ParticipantHandler) {
  return (
    req: IncomingMessage & { body?: unknown },
    res: ServerResponse,
    next: (error?: unknown) => void,
  ): void => {
    // a body parser that ran has read the stream (and left req.body); one that did not match the
    // content type left the stream unread, and Express 4's `{}` in req.body: then read it here
    if (!req.readableEnded) delete req.body;
    handleNodeRequest(participant, req, res).then((handled) => {
      if (!handled) next();
    }, next);
  };
}

/** What the Fastify adapter uses of a request and a reply. */
export interface FastifyRequestLike {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
  protocol?: string;
  host?: string;
  ip?: string;
  raw?: { socket?: { remoteAddress?: string } };
}
export interface FastifyReplyLike {
  code(status: number): FastifyReplyLike;
  headers(values: Record<string, string>): FastifyReplyLike;
  send(payload: unknown): unknown;
}
export interface FastifyLike {
  post(
    path: string,
    handler: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>,
  ): unknown;
  get(
    path: string,
    handler: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>,
  ): unknown;
}

/**
 * Fastify: `app.register(fastifyParticipant(participant, { path, jobsPath }))`, the same paths as the
 * handler's options (default `/migrate` and `/jobs`). Fastify parses the JSON body.
 */
export function fastifyParticipant(
  participant: ParticipantHandler,
  paths: { path?: string; jobsPath?: string } = {},
) {
  const route = async (request: FastifyRequestLike, reply: FastifyReplyLike) => {
    const remoteAddress = request.raw?.socket?.remoteAddress ?? request.ip;
    const answer = await participant.answer({
      method: request.method,
      url: request.url,
      headers: request.headers,
      body: request.body,
      ...(request.host === undefined ? {} : { origin: `${request.protocol ?? 'http'}://${request.host}` }),
      ...(remoteAddress === undefined ? {} : { remoteAddress }),
    });
    return reply
      .code(answer.status)
      .headers({ 'content-type': 'application/json', ...answer.headers })
      .send(JSON.stringify(answer.body ?? null));
  };
  return async (app: FastifyLike): Promise<void> => {
    app.post(paths.path ?? '/migrate', route);
    app.get(`${paths.jobsPath ?? '/jobs'}/:id`, route);
  };
}
