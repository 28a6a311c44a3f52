import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import {
  type ParticipantJob,
  createParticipantHandler,
  expressParticipant,
  fastifyParticipant,
  loopbackCallerOnly,
} from '../../shared/participant';
import { jobBody } from './conformance';

/**
 * The handler on the real frameworks (devDependencies; the package types them structurally and depends
 * on neither): Express 5 with and without express.json() before it, and Fastify 5 as a plugin. Each serves
 * its own routes beside the participant's, and a job runs to 200 through POST, 202 + Location and a poll.
 */

const job = jobBody('conv-1');

function participant() {
  const copied: ParticipantJob[] = [];
  const copy = async (j: ParticipantJob) => {
    await new Promise((r) => setTimeout(r, 50));
    copied.push(j);
  };
  const handler = createParticipantHandler({
    bulkCopy: copy,
    deltaCopy: copy,
    authenticate: loopbackCallerOnly(),
  });
  return { handler, copied };
}

/** POST the job, poll its Location until 200; the app's own route answers beside it. */
async function drive(base: string) {
  const first = await fetch(`${base}/migrate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(job),
  });
  expect(first.status).toBe(202);
  const location = first.headers.get('location') as string;
  expect(new URL(location).origin).toBe(base);
  expect(first.headers.get('retry-after')).toBe('1');
  let status = 202;
  for (let i = 0; i < 50 && status === 202; i += 1) {
    await new Promise((r) => setTimeout(r, 20));
    status = (await fetch(location)).status;
  }
  expect(status).toBe(200);
  // Prefer: wait on the same job, done: 200 at once
  const again = await fetch(`${base}/migrate`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', prefer: 'wait=1' },
    body: JSON.stringify(job),
  });
  expect(await again.json()).toEqual({ done: true });
  expect(await (await fetch(`${base}/hello`)).json()).toEqual({ hello: 'world' });
}

describe.each([
  ['with express.json() before it', true],
  ['without a body parser', false],
])('Express 5, %s', (_, parse) => {
  let server: Server;
  afterEach(async () => {
    await new Promise((r) => (server.closeAllConnections(), server.close(r)));
  });
  test('runs a job to 200; other routes pass through', async () => {
    const { handler, copied } = participant();
    const app = express();
    if (parse) app.use(express.json());
    app.use(expressParticipant(handler));
    app.get('/hello', (_req, res) => {
      res.json({ hello: 'world' });
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    await drive(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    expect(copied).toHaveLength(1);
    handler.close();
  });
});

test('Fastify 5, as a plugin: runs a job to 200; other routes pass through', async () => {
  const { handler, copied } = participant();
  const app = Fastify();
  await app.register(fastifyParticipant(handler));
  app.get('/hello', async () => ({ hello: 'world' }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    await drive(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
    expect(copied).toHaveLength(1);
  } finally {
    handler.close();
    await app.close();
  }
});
