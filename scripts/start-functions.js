'use strict';
// `npm run start:functions`: the app on the real Functions extensions without Core Tools. Builds (tsc and
// dotnet, both incremental), checks the settings, then starts Azurite (in memory, loopback, telemetry off),
// the Node worker stand-in and the WebJobs host (hosts/webjobs), prints the API base, and on Ctrl-C or
// SIGTERM stops every process it started. Settings: local.settings.json's Values (as `func start` reads
// them), then the environment, with `npm start`'s defaults (dev timing, ROUTELOCK_AUTH=none) and
// ROUTELOCK_TASK_HUB `routelocklocal` (host.json names it).
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const { existsSync, mkdtempSync, readFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { dirname, join } = require('node:path');
const { setTimeout, clearTimeout } = require('node:timers');
const { buildIfStale } = require('./build-state');

const root = dirname(require.resolve('../package.json'));
const hostDir = join(root, 'hosts/webjobs');
const hostDll = join(hostDir, 'bin/Debug/net10.0/routelock-webjobs-host.dll');
const KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';
const children = [];
const cleanups = [];
let stopping = false;

function say(line) {
  process.stdout.write(`start:functions: ${line}\n`);
}

function fail(code, message) {
  process.stderr.write(`start:functions: ${code}: ${message}\n`);
  return stop(1);
}

function values(file) {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')).Values ?? {}) : {};
}

/** The app's settings as the Functions host would hand them to the worker. */
function settings() {
  const { localEnv } = require(join(root, 'dist/local/host.js'));
  // the embedded host's defaults (dev timing, ROUTELOCK_AUTH=none): the front door binds loopback only
  const env = localEnv({
    ROUTELOCK_TASK_HUB: 'routelocklocal',
    ...values(join(root, 'local.settings.json')),
    ...process.env,
  });
  delete env.CONTAINER_NAME; // the Durable extension would take the machine for Linux consumption
  return env;
}

/** A bad setting stops here, before any process starts: the app's own parser, then the port. */
/**
 * A bad setting stops here, before any process starts: the app's own parser, then the port. The timer
 * schedules the triggers name (`%ROUTELOCK_SWEEP_SCHEDULE%`) take the app's defaults, which Azure's app
 * settings always carry (infra/bicep/main.bicep) but a developer's environment does not.
 */
function check(env) {
  const { parseConfig } = require(join(root, 'dist/shared/config.js'));
  const { operations } = parseConfig(env);
  const port = env.PORT ?? '7071';
  // PORT=0 would leave the front door's listener prefix, and the Durable client's URLs, without a port
  if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535)
    throw new Error(`PORT=${port} is not a port number (1-65535)`);
  // the front door trusts x-ms-client-principal from any local caller, as `func start` does
  if (env.ROUTELOCK_AUTH === 'appservice')
    throw new Error(
      'ROUTELOCK_AUTH=appservice trusts the x-ms-client-principal header, which any local process or page can send to this host; use none or entra',
    );
  return {
    ROUTELOCK_PROBE_SCHEDULE: operations.probeSchedule,
    ROUTELOCK_SWEEP_SCHEDULE: operations.sweepSchedule,
    ROUTELOCK_RECONCILE_SCHEDULE: operations.reconciliation.schedule,
    ...env,
  };
}

function dotnetBuild() {
  execFileSync(
    'dotnet',
    ['build', hostDir, '--packages', join(root, '.tools/nuget'), '-nologo', '-v', 'q', '-clp:ErrorsOnly'],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' },
    },
  );
}

/**
 * Start a child and resolve with the first match of `ready` in its output. Its stderr passes through; its
 * stdout too when `echo` (the worker's and the host's lines, not Azurite's start-up chatter). A child
 * that exits before it is ready fails the start; one that exits later stops the others.
 */
function start(name, command, args, env, ready, { cwd = root, echo = true } = {}) {
  const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push({ name, child });
  say(`${name} started (pid ${child.pid})`);
  return new Promise((resolve, reject) => {
    let seen = '';
    let up = false;
    const timer = setTimeout(() => reject(new Error(`${name} did not start in 120 s:\n${seen}`)), 120_000);
    const onData = (chunk) => {
      if (up) return;
      seen += chunk;
      const match = ready.exec(seen);
      if (match) {
        up = true;
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout.setEncoding('utf8').on('data', (chunk) => {
      onData(chunk);
      if (echo) process.stdout.write(chunk);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk) => {
      onData(chunk);
      process.stderr.write(chunk);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (stopping) return;
      if (!up) reject(new Error(`${name} exited (${signal ?? code}) before it was ready`));
      else void fail('PROCESS_EXITED', `${name} exited (${signal ?? code}); stopping the others`);
    });
  });
}

/** Azurite in memory; its working directory a temporary one, so nothing it writes lands in the checkout. */
async function startAzurite() {
  const workspace = mkdtempSync(join(tmpdir(), 'routelock-azurite-'));
  cleanups.push(() => rmSync(workspace, { recursive: true, force: true }));
  const bin = join(root, 'node_modules/azurite/dist/src/azurite.js');
  const hosts = ['--blobHost', '127.0.0.1', '--queueHost', '127.0.0.1', '--tableHost', '127.0.0.1'];
  const ports = ['--blobPort', '0', '--queuePort', '0', '--tablePort', '0'];
  const flags = ['--inMemoryPersistence', '--disableTelemetry', '--skipApiVersionCheck', '--silent'];
  const ready =
    /Blob service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)[\s\S]*Queue service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)[\s\S]*Table service is successfully listening at http:\/\/127\.0\.0\.1:(\d+)/;
  const [, blob, queue, table] = await start(
    'azurite',
    process.execPath,
    [bin, ...hosts, ...ports, ...flags],
    process.env,
    ready,
    { cwd: workspace, echo: false },
  );
  say(`Azurite (in memory) on 127.0.0.1: blob ${blob}, queue ${queue}, table ${table}`);
  const endpoint = (kind, port) => `${kind}Endpoint=http://127.0.0.1:${port}/devstoreaccount1;`;
  return `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};${endpoint('Blob', blob)}${endpoint('Queue', queue)}${endpoint('Table', table)}`;
}

/** Stop the host first (it drains its work), then the worker, then Azurite; SIGKILL after 15 s. */
async function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const { child } of [...children].reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
  for (const cleanup of cleanups) cleanup();
  process.exit(code);
}

async function main() {
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  buildIfStale(root, (line) => say(line));
  let env;
  try {
    env = check(settings());
  } catch (error) {
    return fail('SETTING_INVALID', error instanceof Error ? error.message : String(error));
  }
  say('building hosts/webjobs (dotnet, incremental)…');
  dotnetBuild();
  // --build: restore and build only (the real-engine test step builds once before its suites start)
  if (process.argv.includes('--build')) return stop(0);
  // ROUTELOCK_HOST_JSON names another host.json: the suites' copy with a shorter queue visibility timeout
  const hostJson = env.ROUTELOCK_HOST_JSON ?? join(root, 'host.json');
  const checked = spawnSync('dotnet', [hostDll, '--check'], {
    env: { ...env, ROUTELOCK_HOST_JSON: hostJson },
    encoding: 'utf8',
  });
  if (checked.status !== 0) return fail('SETTING_INVALID', checked.stderr.trim() || `exit ${checked.status}`);
  // Per run, in the children's environment only (never argv, never printed): the worker refuses any call
  // without it, and the front door the Durable HTTP API, as Azure asks for the extension's systemKey.
  env = { ...env, ROUTELOCK_HOST_SECRET: randomBytes(32).toString('hex') };
  // ROUTELOCK_FUNCTIONS_STORAGE names a storage that outlives this host (an Azurite on disk, say): the
  // task hub then survives a restart, as Azure Storage does; no Azurite of its own is started
  const storage = env.ROUTELOCK_FUNCTIONS_STORAGE ?? (await startAzurite());
  if (env.ROUTELOCK_FUNCTIONS_STORAGE !== undefined) say('task hub on ROUTELOCK_FUNCTIONS_STORAGE');
  const [, workerUrl] = await start(
    'worker',
    process.execPath,
    [join(hostDir, 'worker.js')],
    // the Durable client keeps its management URLs only when WEBSITE_HOSTNAME is set, as the Functions
    // host sets it; without it durable-functions points them at localhost:7071
    { ...env, WEBSITE_HOSTNAME: `127.0.0.1:${env.PORT ?? '7071'}` },
    /worker listening on (\S+)/,
  );
  const hostEnv = {
    ...env,
    AzureWebJobsStorage: storage,
    ROUTELOCK_WORKER_URL: workerUrl,
    ROUTELOCK_HOST_JSON: hostJson,
  };
  const [, api] = await start('webjobs host', 'dotnet', [hostDll], hostEnv, /listening on (\S+)/);
  say(`API base ${api}`);
  say(
    'the Cosmos DB change-feed trigger (lockTelemetry) is not served here: it stays on the embedded path (npm start)',
  );
}

main().catch((error) => fail('START_FAILED', error instanceof Error ? error.message : String(error)));
