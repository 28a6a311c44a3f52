import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { parseConfig } from '../../shared/config';
import { Router } from '../../shared/core/router';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import {
  type BuiltPackage,
  buildPackages,
  packPackage,
  undeclaredModules,
} from '../../scripts/build-packages';
import {
  installed,
  prelink as prelinkFrom,
  readLock,
  scratchProject as scratchInstall,
} from '../../testkit/scratchInstall';

/**
 * The packages as a service gets them (docs/design.md §5.4): built (`npm run packages`), packed (`npm
 * pack`), installed from the tarballs into scratch projects in the OS temporary folder, outside this project
 * (so Node cannot fall back to its node_modules), with `npm install --offline` and an empty npm cache: every
 * dependency must come from this project's own install, copied into the scratch project's node_modules
 * beforehand (npm keeps an installed package that satisfies the range and fetches nothing). Then, from there,
 * in child processes, through both `require` and `import`:
 * - the client resolves routes from the embedded host's handlers over real HTTP and decides;
 * - the library resolves and decides from the same SQLite file, and refuses to write;
 * - a Cosmos-only library install (no better-sqlite3) loads its main entry.
 */

jest.setTimeout(120_000);

const execFileAsync = promisify(execFile);
const root = resolve(__dirname, '../..');
const lock = readLock(root);
const temp = mkdtempSync(join(tmpdir(), 'routelock-packages-'));
const dbPath = join(temp, 'routes.db');
const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'northeurope' };
// The dev profile with production's write lease: the seeded write lock stays in force for the whole test.
const timingEnv = {
  ROUTELOCK_PROFILE: 'dev',
  ROUTELOCK_WRITE_LEASE_SECONDS: '300',
  ROUTELOCK_WRITE_BUDGET_SECONDS: '900',
  ROUTELOCK_HARD_DELETE_LEASE_SECONDS: '21600',
};
const libraryEnv = { ...timingEnv, ROUTELOCK_STORE: 'sqlite', ROUTELOCK_SQLITE_PATH: dbPath };
/** What neither package may bring along (the client: not even the library's own dependencies). */
const heavy = ['@azure/functions', 'durable-functions', 'applicationinsights', 'better-sqlite3'];
const notInClient = [...heavy, '@azure/cosmos', '@azure/identity', 'zod', 'luxon'];

let built: BuiltPackage[];
let tarballs: Record<string, string>;
let host: LocalHost;

function prelink(project: string, names: string[]): void {
  prelinkFrom(root, lock, project, names);
}

/** A scratch project with `deps` pre-linked and `tarball` installed offline. */
function scratchProject(name: string, tarball: string, deps: string[]): string {
  return scratchInstall(root, lock, { temp, name, tarballs: [tarball], deps });
}

/**
 * Run `source` as a module of `project` (.cjs or .mjs), its stdout's last line parsed as JSON. Asynchronous:
 * the host answering the child runs in this process.
 */
async function runIn(
  project: string,
  file: string,
  source: string,
  env: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  writeFileSync(join(project, file), source);
  const { stdout } = await execFileAsync(process.execPath, ['--expose-gc', join(project, file)], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
    timeout: 60_000,
  }).catch((e: { stdout?: string; stderr?: string; message: string }) => {
    throw new Error(`${file} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Record<string, unknown>;
}

/** The module settings a consumer's tsconfig may have, one per module resolution. */
const resolutions = {
  node16: { module: 'node16', moduleResolution: 'node16' },
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext' },
  bundler: { module: 'esnext', moduleResolution: 'bundler' },
  node10: { module: 'commonjs', moduleResolution: 'node10' },
} as const;

/**
 * Type-check `files` (name → source) in `project` as a consumer would: strict, `module: node16` unless
 * told (under node16, a `.cts` file resolves the `require` condition of the exports map and a `.mts`
 * file the `import` one), skipLibCheck as `tsc --init` sets it. Each file holds a `@ts-expect-error`, so
 * types that resolved to `any` fail the check too. The compiler's diagnostics, or '' when clean.
 */
function typeCheck(
  project: string,
  files: Record<string, string>,
  resolution: keyof typeof resolutions = 'node16',
): string {
  for (const [name, source] of Object.entries(files)) writeFileSync(join(project, name), source);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        ...resolutions[resolution],
        target: 'es2022',
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
      },
      files: Object.keys(files),
    }),
  );
  const tsc = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', project], {
    cwd: project,
    encoding: 'utf8',
  });
  return tsc.status === 0 ? '' : `${tsc.stdout}${tsc.stderr}`;
}

/** The loaded-module report every child prints: node_modules packages it loaded, module count, heap. */
const loadedReport = `
function loaded(cache) {
  const files = Object.keys(cache);
  const packages = [...new Set(files.map((f) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(f)?.[1]).filter(Boolean))].sort();
  globalThis.gc();
  return { modules: files.length, packages, heapMiB: Math.round(process.memoryUsage().heapUsed / 1048576 * 10) / 10 };
}`;

/** One program for both module systems: the client resolves, decides and meets a missing route. */
const clientProgram = (load: string, cache: string) => `${load}
${loadedReport}
(async () => {
  const client = new RoutingClient({ baseUrl: process.env.API });
  const cold = await client.resolve('cold');
  const hot = await client.resolve('hot');
  const missing = await client.resolve('nope').catch((e) => ({ isError: e instanceof RoutingServiceError, status: e.status, code: e.code }));
  console.log(JSON.stringify({
    cold: { write: decide(cold, 'write', ${JSON.stringify(SOURCE)}), elsewhere: decide(cold, 'write', ${JSON.stringify(TARGET)}) },
    hot: { read: decide(hot, 'read', ${JSON.stringify(SOURCE)}), write: decide(hot, 'write', ${JSON.stringify(SOURCE)}) },
    missing,
    statuses: {
      allow: decisionStatus(decide(cold, 'write', ${JSON.stringify(SOURCE)})),
      notHere: decisionStatus(decide(cold, 'write', ${JSON.stringify(TARGET)})),
      deny: decisionStatus(decide(hot, 'write', ${JSON.stringify(SOURCE)})),
      notFound: decisionStatus(decide(null, 'read', ${JSON.stringify(SOURCE)})),
    },
    ...loaded(${cache}),
  }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

/** The library from the SQLite file: resolves, decides, refuses to write. */
const libraryProgram = (load: string, cache: string) => `${load}
${loadedReport}
(async () => {
  const router = await lib.openRouter();
  const cold = (await router.view('cold')).view;
  const hot = (await router.view('hot')).view;
  const missing = await router.resolve('nope').catch((e) => ({ isError: e instanceof lib.RouteLockError, code: e.code, status: lib.errorKind(e.code).status }));
  const refusal = (e) => ({ isError: e instanceof lib.RouteLockError, code: e.code, status: lib.errorKind(e.code).status });
  const create = await router.createRoute('new', ${JSON.stringify(SOURCE)}).then(() => 'written', refusal);
  const prelock = await router.prelock('cold', { migrationId: 'm', owner: 'o', target: ${JSON.stringify(TARGET)} }).then(() => 'written', refusal);
  const direct = lib.createRouter({ store: new SqliteStore(process.env.ROUTELOCK_SQLITE_PATH), timing: lib.parseConfig(process.env).timing });
  const hotDirect = (await direct.view('hot')).view;
  console.log(JSON.stringify({
    cold: { write: lib.decide(cold, 'write', ${JSON.stringify(SOURCE)}), elsewhere: lib.decide(cold, 'write', ${JSON.stringify(TARGET)}) },
    hot: { read: lib.decide(hot, 'read', ${JSON.stringify(SOURCE)}), write: lib.decide(hot, 'write', ${JSON.stringify(SOURCE)}), direct: lib.decide(hotDirect, 'write', ${JSON.stringify(SOURCE)}) },
    missing, create, prelock,
    ...loaded(${cache}),
  }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

/**
 * Every type the client's README and its functions' signatures name, imported as a consumer does, each
 * checked to be a real type, not `any` (what a failed resolution under skipLibCheck can leave).
 */
const publicTypeNames = [
  'AnyErrorCode',
  'ClientErrorCode',
  'ClientSettings',
  'Clock',
  'Decision',
  'DecisionStatus',
  'Enforcement',
  'ErrorCode',
  'Location',
  'LockGrant',
  'LockView',
  'Operation',
  'OutagePolicy',
  'Phase',
  'ResolvedRoute',
  'ResolvedView',
  'RouteResolver',
  'RouteView',
  'RoutingClientOptions',
  'Secondary',
  'SecondaryRole',
  'ServerInfo',
  'StaleMark',
];
const publicTypesSource = `import {
  RoutingClient,
  RoutingClientOptionError,
  RoutingServiceError,
  ${publicTypeNames.map((n) => `type ${n},`).join('\n  ')}
} from '@routelock/client';
type NotAny<T> = 0 extends 1 & T ? false : true;
${publicTypeNames.map((n) => `export const ${n}IsTyped: NotAny<${n}> = true;`).join('\n')}
export const client: RoutingClient = new RoutingClient({ baseUrl: 'http://127.0.0.1:7071/api' });
export const errors = [RoutingServiceError, RoutingClientOptionError];
export const where: Location = { region: 'westeurope', account: 'chatweu01' };
export const op: Operation = 'write';
export async function check(): Promise<[RouteView, LockGrant, ServerInfo]> {
  const view: RouteView = await client.resolve('conv-1');
  const grant: LockGrant = await client.prelock('conv-1', { migrationId: 'm', owner: 'o', target: where });
  return [view, grant, await client.ready()];
}
// @ts-expect-error not an outage policy
export const policy: OutagePolicy = 'bogus';
`;

const expectedDecisions = {
  cold: { write: { kind: 'allow' }, elsewhere: { kind: 'notHere', location: SOURCE } },
  hot: { read: { kind: 'allow' }, write: { kind: 'deny', retryAfterSeconds: expect.any(Number) } },
};

beforeAll(async () => {
  built = buildPackages(root, join(temp, 'built'));
  tarballs = Object.fromEntries(built.map((b) => [b.name, packPackage(b, join(temp, 'tarballs'))]));

  // Seed the SQLite file as routelock would have written it: an unlocked route and one under a
  // write lock (taken on a clock set back, so the lock is in force now).
  const timing = parseConfig(timingEnv).timing;
  let now = Date.now() - 30_000;
  const seed = new SqliteStore(dbPath);
  const writer = new Router({ store: seed, timing, clock: () => now });
  await writer.createRoute('cold', SOURCE);
  await writer.createRoute('hot', SOURCE);
  const grant = await writer.prelock('hot', { migrationId: 'm-hot', owner: 'test', target: TARGET });
  now = Date.parse(grant.startsAt) + (timing.clockSkewSeconds + timing.safetyBufferSeconds + 1) * 1000;
  await writer.escalate('hot', { token: grant.token as string, phase: 'hardDelete' });
  now = Date.now() - 1000;
  await writer.escalate('hot', { token: grant.token as string, phase: 'write' });

  host = await startLocalHost({
    env: { PORT: '0', ...timingEnv },
    store: seed,
    statePath: ':memory:',
    log: () => undefined,
  });
}, 300_000);

afterAll(async () => {
  await host?.close();
  rmSync(temp, { recursive: true, force: true });
});

describe('@routelock/client', () => {
  let project: string;
  beforeAll(() => {
    project = scratchProject('client-service', tarballs['@routelock/client'] as string, ['lru-cache']);
  }, 120_000);

  test('installs offline with nothing heavy: no @azure/*, Durable Functions, telemetry SDK, SQLite, zod', () => {
    const tree = installed(project);
    expect(tree).toContain('@routelock/client');
    for (const name of notInClient) expect(tree).not.toContain(name);
    expect(tree.filter((n) => n.startsWith('@azure/'))).toEqual([]);
    const pkg = JSON.parse(
      readFileSync(join(project, 'node_modules/@routelock/client/package.json'), 'utf8'),
    ) as {
      dependencies: Record<string, string>;
    };
    expect(Object.keys(pkg.dependencies)).toEqual(['lru-cache']);
  });

  test("the build's rule: the client's JavaScript loads lru-cache alone; an undeclared module is caught", () => {
    const client = built.find((b) => b.name === '@routelock/client') as BuiltPackage;
    expect(client.requires).toEqual(['lru-cache']);
    const manifest = JSON.parse(readFileSync(join(client.dir, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(undeclaredModules(client.requires, manifest)).toEqual([]);
    // negative control: a client that started to load zod (or a deep @azure path) is refused
    expect(
      undeclaredModules([...client.requires, 'zod', '@azure/cosmos/dist/x', 'node:fs'], manifest),
    ).toEqual(['@azure/cosmos', 'zod']);
  });

  test('typed through both conditions of the exports map (.cts: require, .mts: import)', () => {
    const source = (load: string) => `${load}
const client = new RoutingClient({ baseUrl: 'http://127.0.0.1:7071/api', timeoutMs: 500 });
const decision: Decision = decide(null, 'read', 'westeurope');
const status: number = decisionStatus(decision).status;
export const checked = [client, status];
// @ts-expect-error not an option
new RoutingClient({ baseUrl: 'x', noSuchOption: true });
`;
    expect(
      typeCheck(project, {
        'types.cts': source(
          "import { RoutingClient, decide, decisionStatus, type Decision } from '@routelock/client';",
        ),
        'types.mts': source(
          "import { RoutingClient, decide, decisionStatus, type Decision } from '@routelock/client';",
        ),
      }),
    ).toBe('');
    // the check can fail: a misspelt export is an error
    expect(
      typeCheck(project, {
        'wrong.mts':
          "import { RoutingKlient } from '@routelock/client';\nexport const x = RoutingKlient;\n// @ts-expect-error\nconst y: number = 'a';\n",
      }),
    ).toMatch(/RoutingKlient/);
  });

  test.each(Object.keys(resolutions) as (keyof typeof resolutions)[])(
    'every public type imports as a consumer imports it, under moduleResolution %s',
    (resolution) => {
      const files = Object.fromEntries(
        (resolution === 'node16' || resolution === 'nodenext' ? ['.cts', '.mts'] : ['.ts']).map((ext) => [
          `public-types${ext}`,
          publicTypesSource,
        ]),
      );
      expect(typeCheck(project, files, resolution)).toBe('');
    },
  );

  test('the public-types check can fail: a type the package does not export is an error', () => {
    const missing = publicTypesSource.replace('type RouteView,', 'type RouteView, type NoSuchView,');
    expect(typeCheck(project, { 'missing.ts': missing }, 'bundler')).toMatch(/NoSuchView/);
    // and a type that resolved to `any` fails its not-any check
    const anyView = `${publicTypesSource}
type Shadow = any;
export const shadowIsAny: NotAny<Shadow> = true;
`;
    expect(typeCheck(project, { 'any.ts': anyView }, 'bundler')).toMatch(/not assignable/);
  });

  test.each([
    [
      'require',
      'resolve.cjs',
      "const { RoutingClient, RoutingServiceError, decide, decisionStatus } = require('@routelock/client');",
      'require.cache',
    ],
    [
      'import',
      'resolve.mjs',
      "import { RoutingClient, RoutingServiceError, decide, decisionStatus } from '@routelock/client';\nimport { createRequire } from 'node:module';",
      'createRequire(import.meta.url).cache',
    ],
  ])(
    'through %s: resolves from the host over HTTP and decides every case',
    async (_how, file, load, cache) => {
      const out = await runIn(project, file, clientProgram(load, cache), { API: `${host.url}/api` });
      expect(out).toMatchObject({
        ...expectedDecisions,
        missing: { isError: true, status: 404, code: 'NotFound' },
      });
      for (const name of notInClient) expect(out.packages).not.toContain(name);
    },
  );
});

/**
 * The test double (`@routelock/client/testing`) as a service's tests use it: typed through both conditions
 * of the exports map, accepted where the service's code takes a `RouteResolver`, and run from the
 * installed tarball through `require` and `import`, a decision for every state.
 */
const doubleTypesSource = (load: string) => `${load}
export async function handleWrite(routing: RouteResolver, id: string): Promise<Decision> {
  return (await routing.decideFor(id, 'write', 'westeurope')).decision;
}
const double = new TestRoutingClient({ clockSkewSeconds: 0 });
double.set('conv-1', states.writeLock({ from: 'westeurope', to: 'eastus' }));
export const state: RouteState = double.stateOf('conv-1');
export const answer = handleWrite(double, 'conv-1');
// @ts-expect-error not a state
double.set('conv-1', { kind: 'halfLocked' });
`;

const doubleProgram = (load: string) => `${load}
(async () => {
  const routing = new TestRoutingClient({ whenUnreachable: 'serveStaleReads' });
  const from = 'westeurope', to = 'eastus';
  const all = {
    unlocked: states.unlocked({ at: from }),
    preLock: states.preLock({ from, to }),
    hardDelete: states.hardDelete({ from, to }),
    writeLock: states.writeLock({ from, to }),
    pendingTarget: states.pendingTarget({ from, to }),
    retiredSource: states.retiredSource({ from, to }),
    notFound: states.notFound(),
    unreachable: states.unreachable({ lastSeen: states.unlocked({ at: from }) }),
  };
  const out = {};
  for (const [name, state] of Object.entries(all)) {
    routing.set('conv-1', state);
    out[name] = [];
    for (const op of ['read', 'write', 'delete']) out[name].push((await routing.decideFor('conv-1', op, from)).decision.kind);
  }
  console.log(JSON.stringify({ ...out, isClient: routing.resolve !== undefined && !(routing instanceof RoutingClient) }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

describe('@routelock/client/testing', () => {
  let project: string;
  beforeAll(() => {
    project = scratchProject('double-service', tarballs['@routelock/client'] as string, ['lru-cache']);
  }, 120_000);

  test('typed through both conditions of the exports map; the double is a RouteResolver', () => {
    const load =
      "import type { Decision, RouteResolver } from '@routelock/client';\nimport { TestRoutingClient, states, type RouteState } from '@routelock/client/testing';";
    expect(
      typeCheck(project, { 'double.cts': doubleTypesSource(load), 'double.mts': doubleTypesSource(load) }),
    ).toBe('');
  });

  test.each([
    [
      'require',
      'double.cjs',
      "const { RoutingClient } = require('@routelock/client');\nconst { TestRoutingClient, states } = require('@routelock/client/testing');",
    ],
    [
      'import',
      'double.mjs',
      "import { RoutingClient } from '@routelock/client';\nimport { TestRoutingClient, states } from '@routelock/client/testing';",
    ],
  ])('through %s: decides every state without a server', async (_how, file, load) => {
    const out = await runIn(project, file, doubleProgram(load), {});
    expect(out).toEqual({
      unlocked: ['allow', 'allow', 'allow'],
      preLock: ['allow', 'allow', 'allow'],
      hardDelete: ['allow', 'allow', 'tombstone'],
      writeLock: ['allow', 'deny', 'deny'],
      pendingTarget: ['allow', 'allow', 'allow'],
      retiredSource: ['notHere', 'notHere', 'notHere'],
      notFound: ['notFound', 'notFound', 'notFound'],
      unreachable: ['allow', 'unavailable', 'unavailable'],
      isClient: true,
    });
  });
});

/**
 * The request guard (`@routelock/client/middleware`) as a service links it: typed through both conditions
 * (a node:http service), and run from the installed tarball through `require` and `import`: a node:http
 * server behind the guard, its route states from the double, answered over real HTTP.
 */
const guardTypesSource = (load: string) => `${load}
import { createServer, type IncomingMessage } from 'node:http';
const routing = new TestRoutingClient();
const guard = routeGuard<IncomingMessage>({
  routing,
  serving: 'westeurope',
  target: (req): GuardTarget => ({ resourceId: 'conv-1', operation: req.method === 'GET' ? 'read' : 'write' }),
  tombstone: () => undefined,
});
export const server = createServer(
  guard.node((req, res, admission?: Admission) => {
    if (admission && !guard.commitOk(req)) return guard.late(res, req);
    res.end();
  }),
);
`;

const guardProgram = (load: string) => `${load}
const { createServer } = require('node:http');
(async () => {
  const routing = new TestRoutingClient();
  const guard = routeGuard({
    routing,
    serving: 'westeurope',
    target: (req) => ({ resourceId: 'conv-1', operation: req.method === 'GET' ? 'read' : 'write' }),
    tombstone: () => undefined,
  });
  const server = createServer(guard.node((req, res) => res.writeHead(guard.commitOk(req) ? 201 : 503).end()));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = 'http://127.0.0.1:' + server.address().port + '/items/conv-1';
  const out = {};
  for (const [name, state] of Object.entries({
    unlocked: states.unlocked({ at: 'westeurope' }),
    writeLock: states.writeLock({ from: 'westeurope', to: 'eastus', forSeconds: 2 }),
    notFound: states.notFound(),
  })) {
    routing.set('conv-1', state);
    const res = await fetch(url, { method: 'POST' });
    const body = await res.text();
    out[name] = [res.status, res.headers.get('retry-after'), body ? JSON.parse(body).code : null];
  }
  server.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
`;

describe('@routelock/client/middleware', () => {
  let project: string;
  beforeAll(() => {
    project = scratchProject('guard-service', tarballs['@routelock/client'] as string, ['lru-cache']);
  }, 120_000);

  test('typed through both conditions of the exports map (a node:http service)', () => {
    const load =
      "import { routeGuard, type Admission, type GuardTarget } from '@routelock/client/middleware';\nimport { TestRoutingClient } from '@routelock/client/testing';";
    expect(
      typeCheck(project, { 'guard.cts': guardTypesSource(load), 'guard.mts': guardTypesSource(load) }),
    ).toBe('');
  });

  test.each([
    [
      'require',
      'guard.cjs',
      "const { routeGuard } = require('@routelock/client/middleware');\nconst { TestRoutingClient, states } = require('@routelock/client/testing');",
    ],
    [
      'import',
      'guard.mjs',
      "import { routeGuard } from '@routelock/client/middleware';\nimport { TestRoutingClient, states } from '@routelock/client/testing';\nimport { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);",
    ],
  ])('through %s: a node:http service behind the guard answers each state', async (_how, file, load) => {
    const out = await runIn(project, file, guardProgram(load), {});
    expect(out).toEqual({
      unlocked: [201, null, null],
      writeLock: [423, '2', 'Locked'],
      notFound: [404, null, 'NotFound'],
    });
  });
});

describe('@routelock/library', () => {
  let project: string;
  beforeAll(() => {
    const manifest = JSON.parse(readFileSync(join(temp, 'built/library/package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    project = scratchProject(
      'library-service',
      tarballs['@routelock/library'] as string,
      Object.keys(manifest.dependencies),
    );
  }, 120_000);

  test('a Cosmos-only install: no native SQLite, Functions, Durable or telemetry SDK; the main entry loads', async () => {
    const tree = installed(project);
    expect(tree).toEqual(expect.arrayContaining(['@routelock/library', '@azure/cosmos']));
    for (const name of heavy) expect(tree).not.toContain(name);
    const out = await runIn(
      project,
      'cosmos-only.cjs',
      `const lib = require('@routelock/library');
${loadedReport}
let sqlite;
try { require('@routelock/library/sqlite'); sqlite = 'loaded'; } catch (e) { sqlite = { code: e.code, names: /better-sqlite3/.test(e.message) }; }
console.log(JSON.stringify({ createRouter: typeof lib.createRouter, CosmosStore: typeof lib.CosmosStore, sqlite, ...loaded(require.cache) }));`,
    );
    expect(out).toMatchObject({
      createRouter: 'function',
      CosmosStore: 'function',
      sqlite: { code: 'MODULE_NOT_FOUND', names: true },
    });
    expect(out.packages).toContain('@azure/cosmos');
    expect(out.packages).not.toContain('better-sqlite3');
  });

  test('typed through both conditions, the /sqlite subpath included', () => {
    const source = `import { createRouter, parseConfig, type Router } from '@routelock/library';
import { SqliteStore } from '@routelock/library/sqlite';
const router: Router = createRouter({ store: new SqliteStore(':memory:'), timing: parseConfig({}).timing });
export const checked = router;
// @ts-expect-error allowMutations is a boolean
createRouter({ store: new SqliteStore(':memory:'), timing: parseConfig({}).timing, allowMutations: 'yes' });
`;
    expect(typeCheck(project, { 'types.cts': source, 'types.mts': source })).toBe('');
  });

  describe('with better-sqlite3 installed beside it (the optional peer)', () => {
    beforeAll(() => prelink(project, ['better-sqlite3']), 60_000);

    test.each([
      [
        'require',
        'enforce.cjs',
        "const lib = require('@routelock/library');\nconst { SqliteStore } = require('@routelock/library/sqlite');",
        'require.cache',
      ],
      [
        'import',
        'enforce.mjs',
        "import * as lib from '@routelock/library';\nimport { SqliteStore } from '@routelock/library/sqlite';\nimport { createRequire } from 'node:module';",
        'createRequire(import.meta.url).cache',
      ],
    ])(
      'through %s: resolves and enforces from the SQLite file, and refuses to write',
      async (_how, file, load, cache) => {
        const out = await runIn(project, file, libraryProgram(load, cache), libraryEnv);
        const refused = { isError: true, code: 'ReadOnlyRouter', status: 403 };
        expect(out).toMatchObject({
          cold: expectedDecisions.cold,
          hot: { ...expectedDecisions.hot, direct: expectedDecisions.hot.write },
          missing: { isError: true, code: 'NotFound', status: 404 },
          create: refused,
          prelock: refused,
        });
        for (const name of ['@azure/functions', 'durable-functions', 'applicationinsights'])
          expect(out.packages).not.toContain(name);
      },
    );
  });
});

/**
 * The participant SDK as a participant's service gets it: installed beside the client, typed through both
 * conditions (the client's `RoutingClient` accepted as its `routing`), and run from the installed tarball
 * through `require` and `import`: a job POSTed with `Prefer: wait` answered 200 once copied, a superseded
 * job's signal aborted. `jose` is an optional peer: only `/entra` needs it.
 */
const participantProgram = (load: string) => `${load}
(async () => {
  const aborted = [];
  const handler = createParticipantHandler({
    bulkCopy: async () => {},
    deltaCopy: (job, signal) => new Promise((resolve) => {
      signal.addEventListener('abort', () => { aborted.push(job.stepAttempt); resolve(); });
      if (job.stepAttempt === 2) resolve();
    }),
    authenticate: loopbackCallerOnly(),
  });
  const server = createServer(nodeListener(handler));
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const url = 'http://127.0.0.1:' + server.address().port + '/migrate';
  const job = (step, stepAttempt, sequence) => ({ migrationId: 'm', resourceId: 'r', from: { region: 'a' }, to: { region: 'b' }, step, migrationAttempt: 1, stepAttempt, attempt: stepAttempt, sequence, lockAcquiredAt: '2026-12-01T10:00:00Z' });
  const post = (body, prefer) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(prefer ? { prefer } : {}) }, body: JSON.stringify(body) });
  const bulk = await post(job('bulkCopy', 1, 1), 'wait=2');
  const delta1 = await post(job('deltaCopy', 1, 2));
  const delta2 = await post(job('deltaCopy', 2, 3), 'wait=2');
  const older = await post(job('deltaCopy', 1, 2));
  handler.close();
  server.close();
  console.log(JSON.stringify({ bulk: bulk.status, delta1: delta1.status, location: /^http:\\/\\/127\\.0\\.0\\.1:\\d+\\/jobs\\/j-2$/.test(delta1.headers.get('location')), delta2: delta2.status, older: older.status, aborted }));
})().catch((e) => { console.error(e); process.exit(1); });
`;

describe('@routelock/participant', () => {
  let project: string;
  beforeAll(() => {
    // both tarballs in one install: a second install would prune what only the first needs
    project = scratchInstall(root, lock, {
      temp,
      name: 'participant-service',
      tarballs: [tarballs['@routelock/participant'] as string, tarballs['@routelock/client'] as string],
      deps: ['lru-cache'],
    });
  }, 120_000);

  test('installs offline with no dependency; its JavaScript loads nothing but jose, and only from /entra', () => {
    const tree = installed(project);
    expect(tree).toContain('@routelock/participant');
    for (const name of [...notInClient, 'jose', 'express', 'fastify']) expect(tree).not.toContain(name);
    const sdk = built.find((b) => b.name === '@routelock/participant') as BuiltPackage;
    expect(sdk.requires).toEqual(['jose']);
    const manifest = JSON.parse(readFileSync(join(sdk.dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      peerDependenciesMeta: Record<string, { optional: boolean }>;
    };
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependenciesMeta.jose?.optional).toBe(true);
    const entry = readFileSync(join(sdk.dir, 'dist/participant/index.js'), 'utf8');
    expect(entry).not.toMatch(/require\("jose"\)/);
  });

  test("typed through both conditions; the client's RoutingClient and the double are its routing", () => {
    const source = (load: string) => `${load}
const routing = new RoutingClient({ baseUrl: 'http://127.0.0.1:7071/api' });
const options: ParticipantOptions = {
  bulkCopy: async (job: ParticipantJob, signal: AbortSignal) => { if (signal.aborted) throw new Error(job.id); },
  deltaCopy: async () => {},
  verify: async (): Promise<VerifyAnswer> => ({ match: true, sourceCount: 0, targetCount: 0 }),
  onNotice: async (order: CleanUpOrder) => { void order.region; },
  routing,
  authenticate: loopbackCallerOnly(),
};
export const handler: ParticipantHandler = createParticipantHandler(options);
export const withDouble = createParticipantHandler({ ...options, routing: new TestRoutingClient() });
export const where: Location = { region: 'westeurope' };
// @ts-expect-error deltaCopy is required
createParticipantHandler({ bulkCopy: async () => {}, authenticate: loopbackCallerOnly() });
`;
    const load = `import { RoutingClient } from '@routelock/client';
import { TestRoutingClient } from '@routelock/client/testing';
import { createParticipantHandler, loopbackCallerOnly, type CleanUpOrder, type Location, type ParticipantHandler, type ParticipantJob, type ParticipantOptions, type VerifyAnswer } from '@routelock/participant';
import type { EntraCallerOptions } from '@routelock/participant/entra';
export type E = EntraCallerOptions;`;
    expect(typeCheck(project, { 'sdk.cts': source(load), 'sdk.mts': source(load) })).toBe('');
  });

  test.each([
    [
      'require',
      'participant.cjs',
      "const { createServer } = require('node:http');\nconst { createParticipantHandler, loopbackCallerOnly, nodeListener } = require('@routelock/participant');",
    ],
    [
      'import',
      'participant.mjs',
      "import { createServer } from 'node:http';\nimport { createParticipantHandler, loopbackCallerOnly, nodeListener } from '@routelock/participant';",
    ],
  ])(
    'through %s: a job answered 200 within Prefer: wait, a superseded one aborted, an older one 409',
    async (_how, file, load) => {
      const out = await runIn(project, file, participantProgram(load), {});
      expect(out).toEqual({ bulk: 200, delta1: 202, location: true, delta2: 200, older: 409, aborted: [1] });
    },
  );

  test('/entra without jose names it; with jose installed beside it, it loads', async () => {
    const probe = `let out; try { out = typeof require('@routelock/participant/entra').entraCaller; } catch (e) { out = { code: e.code, names: /jose/.test(e.message) }; }
console.log(JSON.stringify({ out }));`;
    expect(await runIn(project, 'entra-missing.cjs', probe)).toEqual({
      out: { code: 'MODULE_NOT_FOUND', names: true },
    });
    prelink(project, ['jose']);
    expect(await runIn(project, 'entra.cjs', probe)).toEqual({ out: 'function' });
  });
});
