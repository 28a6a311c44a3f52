import { join } from 'node:path';
import { type CopyJobRequest } from '../../examples/message-store/service';
import { MessageStore } from '../../examples/message-store/service';
import { WORKFLOW_VERSION } from '../../shared/migration/types';
import { type AzuriteStorage, startAzuriteStorage } from '../support/azurite';
import { poll } from '../support/poll';
import { scratchDir } from '../support/scratch';
import { buildCommit, commitBeforeTheChange, deployHostJson, nextVersionBuild } from './builds';
import { type FunctionsHost, ENDED, explained, history, json, startHost, watchMigration } from './host';

/**
 * Deploying while migrations run (docs/design.md §6.7), on the real Durable extension: one Azurite the
 * test owns (`ROUTELOCK_FUNCTIONS_STORAGE`), so the task hub outlives each host, and one SQLite store and
 * task hub name across them. Each migration is stopped mid bulk copy (the participant slow there) by
 * stopping its host, and another build is started on the same task hub:
 * - the build of the commit before the change (builds.ts) → the current build;
 * - the current build → a test-only build of the next workflow version (builds.ts: WORKFLOW_VERSION + 1,
 *   host.json `defaultVersion` with it), which replays the current version;
 * - an instance of the next version, on the current build: host.json's `versionMatchStrategy:
 *   CurrentOrOlder` with `versionFailureStrategy: Reject` makes the extension abandon its work items
 *   unrun (the dispatcher's check, DurableTask.Core's TaskOrchestrationDispatcher), so it neither runs
 *   nor fails; back on the next version's build it completes.
 * Each build runs with its own host.json, the Durable provider's visibility timeouts cut (builds.ts,
 * `deployHostJson`: a stop is forced). The tests hand the running host on to the next, in order. A failure prints the instances' histories.
 */

jest.setTimeout(240_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };
const SLOW_BULK_MS = 6_000;
const NEXT = WORKFLOW_VERSION + 1;

describe('a deploy while migrations run, on the real Durable extension', () => {
  let azurite: AzuriteStorage;
  let store: MessageStore;
  let previous: { commit: string; appRoot: string; hostJson: string };
  let currentHostJson: string;
  let next: { appRoot: string; hostJson: string };
  let host: FunctionsHost | undefined;
  let running = '';
  const bulkStarted: string[] = [];
  const instances = new Map<string, string>();
  const shared: Record<string, string> = {};

  beforeAll(async () => {
    const { commit } = commitBeforeTheChange();
    const began = Date.now();
    const appRoot = buildCommit(commit);
    previous = { commit, appRoot, hostJson: deployHostJson(join(appRoot, 'host.json')) };
    currentHostJson = deployHostJson(join(__dirname, '../../host.json'));
    process.stdout.write(
      `functionsHost/deploy: built ${commit.slice(0, 12)} (the commit before the change) in ${Date.now() - began} ms\n`,
    );
    next = nextVersionBuild(NEXT);
    azurite = await startAzuriteStorage();
    const dir = scratchDir('participant-');
    store = new MessageStore({
      regions: { westeurope: join(dir, 'we.db'), eastus: join(dir, 'eus.db') },
      honoursPreferWait: false,
      copyDelayMs: (job: CopyJobRequest) => {
        if (job.step !== 'bulkCopy') return 200;
        bulkStarted.push(job.resourceId);
        return SLOW_BULK_MS;
      },
    });
    await store.listen();
    Object.assign(shared, {
      ROUTELOCK_FUNCTIONS_STORAGE: azurite.connectionString,
      ROUTELOCK_TASK_HUB: `deploy${Date.now().toString(36)}`,
      ROUTELOCK_SQLITE_PATH: join(scratchDir('data-'), 'routelock.db'),
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: `${store.url}/migrate` }]),
    });
  }, 300_000);

  afterAll(async () => {
    await host?.stop();
    await store?.close();
    await azurite?.close();
  });

  /** Stop the running host, if any, and start `build` on the same task hub and store. */
  async function deploy(build: string, env: Record<string, string> = {}): Promise<FunctionsHost> {
    await host?.stop();
    host = await startHost({ ...shared, ...env });
    running = build;
    store.useRouting(host.api);
    process.stdout.write(`functionsHost/deploy: ${build} listening after ${host.startedMs} ms\n`);
    return host;
  }

  const builds = {
    previous: () =>
      deploy('the previous build', {
        ROUTELOCK_APP_ROOT: previous.appRoot,
        ROUTELOCK_HOST_JSON: previous.hostJson,
      }),
    current: () => deploy('the current build', { ROUTELOCK_HOST_JSON: currentHostJson }),
    next: () =>
      deploy(`workflow version ${NEXT}`, {
        ROUTELOCK_APP_ROOT: next.appRoot,
        ROUTELOCK_HOST_JSON: next.hostJson,
      }),
  };

  /** A route with two messages, and its migration started: stopped once the participant's bulk copy runs. */
  async function startMidFlight(
    on: FunctionsHost,
    id: string,
  ): Promise<{ migrationId: string; phase: string }> {
    const put = await json(`${on.api}/routes/${id}`, {
      method: 'PUT',
      body: JSON.stringify({ location: FROM }),
    });
    expect(put.status).toBe(201);
    store.stores.get('westeurope')?.put(id, 'msg-1', 'hello', 1);
    store.stores.get('westeurope')?.put(id, 'msg-2', 'world', 2);
    const started = await json(`${on.api}/migrations`, {
      method: 'POST',
      body: JSON.stringify({ resourceId: id, target: TO }),
    });
    expect(started.status).toBe(202);
    const migrationId = String(started.body.migrationId);
    instances.set(migrationId, String(started.body.instanceId));
    await poll(
      () => bulkStarted.includes(id),
      (yes) => yes,
      60_000,
    );
    const { body } = await watchMigration(on, migrationId, () => true);
    expect(ENDED).not.toContain(body.status);
    return { migrationId, phase: String(body.phase) };
  }

  /** Wait on `on` until the migration ends: Completed, the route moved, the messages at the target. */
  async function completesOn(
    on: FunctionsHost,
    id: string,
    migrationId: string,
    label: string,
  ): Promise<void> {
    await explained(
      on,
      () => [instances.get(migrationId) ?? ''],
      async () => {
        const began = Date.now();
        const { body, phases } = await watchMigration(on, migrationId, undefined, 120_000);
        process.stdout.write(
          `functionsHost/deploy: ${label}: ${String(body.status)} ${Date.now() - began} ms after the start; phases seen ${phases.join(' → ')}\n`,
        );
        expect(body.status).toBe('Completed');
        expect((await json(`${on.api}/routes/${id}`)).body.location).toEqual(TO);
        const copied = store.stores
          .get('eastus')
          ?.list(id)
          .map((m) => m.messageId);
        expect(copied).toEqual(['msg-1', 'msg-2']);
      },
    );
  }

  test('a migration started on the build of the commit before the change completes on the current build', async () => {
    const id = `deploy-prev-${Date.now()}`;
    const { migrationId, phase } = await startMidFlight(await builds.previous(), id);
    process.stdout.write(`functionsHost/deploy: previous build stopped in phase ${phase}\n`);
    await completesOn(await builds.current(), id, migrationId, `started on ${previous.commit.slice(0, 12)}`);
  });

  test(`a migration started on the current build completes on workflow version ${NEXT}`, async () => {
    const id = `deploy-next-${Date.now()}`;
    const on = host !== undefined && running === 'the current build' ? host : await builds.current();
    const { migrationId, phase } = await startMidFlight(on, id);
    process.stdout.write(`functionsHost/deploy: current build stopped in phase ${phase}\n`);
    await completesOn(await builds.next(), id, migrationId, `version ${WORKFLOW_VERSION} on version ${NEXT}`);
  });

  test(`an instance of version ${NEXT} is left unrun by the current build (CurrentOrOlder, Reject), then completes on version ${NEXT}`, async () => {
    const id = `deploy-newer-${Date.now()}`;
    const { migrationId } = await startMidFlight(await builds.next(), id);
    const instanceId = instances.get(migrationId) ?? '';
    const older = await builds.current();
    const statusOf = async () =>
      (await json(`${older.api}/migrations/${encodeURIComponent(migrationId)}`)).body;
    await explained(
      older,
      () => [instanceId],
      async () => {
        // as the next version's build left it: the current build runs no episode of it
        const before = await historyOf(older, instanceId);
        expect(before.version).toBe(`${NEXT}.0`);
        const statusBefore = await statusOf();
        // the instance's next work item (its poll timer firing) reaches this host, which gives it back
        const abandoned = await poll(
          () => older.lines().filter((l) => l.text.includes(`${instanceId}: Abandoning`)),
          (seen) => seen.length > 0,
          90_000,
        );
        process.stdout.write(
          `functionsHost/deploy: the current build abandoned: ${abandoned[0]?.text.trim()}\n`,
        );
        const during = await historyOf(older, instanceId);
        expect(during).toEqual(before);
        expect(during.runtimeStatus).toBe('Running');
        const status = await statusOf();
        expect(status.phase).toBe(statusBefore.phase);
        expect(ENDED).not.toContain(status.status);
      },
    );
    await completesOn(
      await builds.next(),
      id,
      migrationId,
      `version ${NEXT} after the current build gave it back`,
    );
  });
});

/** The instance's status, version and number of history events, through the host's Durable HTTP API. */
async function historyOf(
  host: FunctionsHost,
  instanceId: string,
): Promise<{ runtimeStatus: string; version: string; events: number }> {
  const text = await history(host, instanceId);
  const body = JSON.parse(text.slice(text.indexOf(' ') + 1)) as {
    runtimeStatus: string;
    version: string;
    historyEvents: unknown[];
  };
  return { runtimeStatus: body.runtimeStatus, version: body.version, events: body.historyEvents.length };
}
