'use strict';
// The Node worker stand-in for hosts/webjobs: the part of the Azure Functions Node worker the app needs.
// It answers `require('@azure/functions-core')` (a module only the real worker provides) so that
// `@azure/functions` registers the app's functions through its own code, loads the app from
// package.json `main`, and runs each invocation through the library's own InvocationModel, so the
// library's real input and output conversions run. The WebJobs host calls it over loopback HTTP.
const Module = require('node:module');
const http = require('node:http');
const { readdirSync } = require('node:fs');
const { basename, dirname, join } = require('node:path');
const { randomUUID, timingSafeEqual } = require('node:crypto');
const { Buffer } = require('node:buffer');

const root = process.env.ROUTELOCK_APP_ROOT || dirname(require.resolve('../../package.json'));
const registry = new Map();
let programmingModel = null;

class Disposable {
  constructor(onDispose) {
    this.onDispose = onDispose;
  }
  dispose() {
    if (this.onDispose) this.onDispose();
    this.onDispose = undefined;
  }
}

const core = {
  // the versions the Functions host of extension bundle 4.x reports; the library checks only the major
  version: '3.10.1',
  hostVersion: '4.1000.0',
  Disposable,
  setProgrammingModel(model) {
    programmingModel = model;
  },
  getProgrammingModel() {
    return programmingModel;
  },
  registerFunction(metadata, callback) {
    registry.set(metadata.name.toLowerCase(), { metadata, callback });
    return new Disposable(() => registry.delete(metadata.name.toLowerCase()));
  },
  registerHook() {
    return new Disposable(() => {});
  },
  log(level, category, message) {
    process.stderr.write(`[worker:${category}:${level}] ${message}\n`);
  },
};

const load = Module._load;
Module._load = function (request, ...rest) {
  return request === '@azure/functions-core' ? core : load.call(this, request, ...rest);
};

/** package.json `main`, a file or a `dir/*.js` glob, as the Node worker reads it. */
function entryFiles() {
  const main = require(join(root, 'package.json')).main;
  if (!main.includes('*')) return [join(root, main)];
  const dir = join(root, dirname(main));
  const suffix = basename(main).replace('*', '');
  return readdirSync(dir)
    .filter((f) => f.endsWith(suffix))
    .sort()
    .map((f) => join(dir, f));
}

function triggerOf(metadata) {
  for (const [name, binding] of Object.entries(metadata.bindings)) {
    if (binding.direction === 'in' && /trigger$/i.test(binding.type)) return { name, ...binding };
  }
  throw new Error(`function ${metadata.name} has no trigger`);
}

/** Byte bodies travel as base64 so binary bodies (the status page's assets) survive the JSON hop. */
function portable(data) {
  if (data && data.http && data.http.body && data.http.body.bytes) {
    data.http.body = { base64: Buffer.from(data.http.body.bytes).toString('base64') };
  }
  return data;
}

function native(data) {
  if (data && data.http && data.http.body && data.http.body.base64) {
    data.http.body = { bytes: Buffer.from(data.http.body.base64, 'base64') };
  }
  return data;
}

async function invoke({ name, inputs, triggerMetadata }) {
  const registered = registry.get(name.toLowerCase());
  if (!registered) throw new Error(`function '${name}' is not registered`);
  const coreContext = {
    invocationId: randomUUID(),
    metadata: registered.metadata,
    request: {
      inputData: inputs.map((i) => ({ name: i.name, data: native(i.data) })),
      triggerMetadata: triggerMetadata || {},
    },
    state: 'invocation',
    log: (level, category, message) => process.stderr.write(`[${name}:${level}] ${message}\n`),
  };
  const model = programmingModel.getInvocationModel(coreContext);
  const { context, inputs: args } = await model.getArguments();
  const result = await model.invokeFunction(context, args, registered.callback);
  const response = await model.getResponse(context, result);
  return {
    returnValue: portable(response.returnValue ?? null),
    outputData: (response.outputData || []).map((o) => ({ name: o.name, data: portable(o.data) })),
  };
}

function describeFunctions() {
  return [...registry.values()].map(({ metadata }) => ({
    name: metadata.name,
    trigger: triggerOf(metadata),
    bindings: metadata.bindings,
  }));
}

function answer(res, body) {
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

// The per-run secret start:functions hands this process and the WebJobs host (never argv, never printed):
// any other local process, or a browser page posting text/plain, would otherwise invoke any activity.
const secret = Buffer.from(process.env.ROUTELOCK_HOST_SECRET || '', 'utf8');
if (secret.length < 32)
  throw new Error('ROUTELOCK_HOST_SECRET is not set: start the worker through npm run start:functions');

function holdsSecret(req) {
  const given = Buffer.from(String(req.headers['x-routelock-worker-key'] || ''), 'utf8');
  return given.length === secret.length && timingSafeEqual(given, secret);
}

/** Only the WebJobs host, by the loopback name it dials: a foreign Host is a DNS-rebinding page. */
function ownHost(req) {
  const port = server.address().port;
  return req.headers.host === `127.0.0.1:${port}` || req.headers.host === `localhost:${port}`;
}

function refuse(req, res, reason) {
  req.resume(); // the body is never read, let alone parsed
  res.writeHead(403, { 'content-type': 'text/plain' });
  res.end(reason);
}

function refusal(req) {
  if (!ownHost(req)) return 'foreign Host header';
  if (!holdsSecret(req)) return 'missing or wrong worker key';
  if (req.method !== 'GET' && !/^application\/json(;|$)/i.test(req.headers['content-type'] || ''))
    return 'not application/json';
  return null;
}

const server = http.createServer((req, res) => {
  const reason = refusal(req);
  if (reason) return refuse(req, res, reason);
  if (req.method === 'GET') return answer(res, describeFunctions());
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (body += chunk));
  req.on('end', async () => {
    try {
      answer(res, { ok: true, ...(await invoke(JSON.parse(body))) });
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      answer(res, { ok: false, message: error.message, stack: error.stack || '' });
    }
  });
});

for (const file of entryFiles()) require(file);
server.listen(Number(process.env.ROUTELOCK_WORKER_PORT || 0), '127.0.0.1', () => {
  // the launcher reads this line to learn the port
  process.stdout.write(
    `worker listening on http://127.0.0.1:${server.address().port}/ (${registry.size} functions)\n`,
  );
});
