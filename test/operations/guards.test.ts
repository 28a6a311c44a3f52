import { accountGuards, createServices } from '../../functions/services';
import { ManualClock } from '../../testkit/clock';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { MetricsRecorder } from '../../shared/migration/telemetry/sink';
import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';
import { scratchConfig } from '../support/scratch';

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

let cosmos: CosmosTestServer;
beforeAll(async () => {
  cosmos = await startCosmosServer();
});
afterAll(async () => {
  await cosmos.close();
});

test('an account with several write regions: every lock mutation is refused with UnsafeConfiguration', async () => {
  const store = await cosmos.connect();
  // The account description as Cosmos DB reports a multi-write account.
  Object.defineProperty(store, 'account', { value: { ...store.account, multipleWriteLocations: true } });
  const services = await createServices(scratchConfig(), { store, sink: new MetricsRecorder() });
  expect(services.warnings.join('\n')).toMatch(/more than one write region/);
  await services.router.createRoute('r-guard', SOURCE); // routes can still be created and read
  await expect(
    services.router.prelock('r-guard', { migrationId: 'm', owner: 'o', target: TARGET }),
  ).rejects.toMatchObject({
    code: 'UnsafeConfiguration',
  });
  expect((await services.router.resolve('r-guard')).doc.lock).toBeNull();
});

test('negative control: the same account with one write region allows lock mutations', async () => {
  const store = await cosmos.connect();
  expect(store.account.multipleWriteLocations).toBe(false);
  const services = await createServices(scratchConfig(), { store, sink: new MetricsRecorder() });
  expect(services.warnings).toEqual([]);
  await services.router.createRoute('r-ok', SOURCE);
  await expect(
    services.router.prelock('r-ok', { migrationId: 'm', owner: 'o', target: TARGET }),
  ).resolves.toMatchObject({ phase: 'prelock' });
});

test('a dedicated-gateway endpoint draws a warning', () => {
  const { warnings } = accountGuards(new SqliteStore(':memory:'), 'https://acct.sqlx.cosmos.azure.com/');
  expect(warnings.join()).toMatch(/dedicated-gateway/);
  expect(accountGuards(new SqliteStore(':memory:'), 'https://acct.documents.azure.com/').warnings).toEqual(
    [],
  );
});

test('clock skew: a write whose store timestamp is far from this clock emits ClockSkewHigh', async () => {
  const store = await cosmos.connect(); // the emulator stamps _ts with the real time
  const recorder = new MetricsRecorder();
  const skewed = new ManualClock(Date.now() + 60_000); // this process runs a minute ahead
  const services = await createServices(scratchConfig(), { store, sink: recorder, clock: skewed.now });
  await services.router.createRoute('r-skew', SOURCE);
  await services.router.prelock('r-skew', { migrationId: 'm', owner: 'o', target: TARGET });
  expect(recorder.snapshot().events).toEqual({ ClockSkewHigh: 1 });
  // negative control: in step with the store, nothing is emitted
  const quiet = new MetricsRecorder();
  const inStep = await createServices(scratchConfig(), { store, sink: quiet });
  await inStep.router.createRoute('r-noskew', SOURCE);
  await inStep.router.prelock('r-noskew', { migrationId: 'm', owner: 'o', target: TARGET });
  expect(quiet.snapshot().events).toEqual({});
});
