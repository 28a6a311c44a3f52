import type { app } from '@azure/functions';
import { lockTelemetryRetry, registerLockTelemetry } from '../../functions/lockTelemetry';

/**
 * The change-feed trigger is registered only with its connection configured (the sample settings leave
 * `COSMOS__accountEndpoint` empty), and always with a retry policy: the host does not re-run a batch
 * whose invocation threw without one.
 */

type Options = Parameters<typeof app.cosmosDB>[1];

function registrations(env: Record<string, string | undefined>): { name: string; options: Options }[] {
  const calls: { name: string; options: Options }[] = [];
  const register = ((name: string, options: Options) =>
    void calls.push({ name, options })) as typeof app.cosmosDB;
  registerLockTelemetry(register, env);
  return calls;
}

test('with COSMOS__accountEndpoint set the trigger is registered on COSMOS with exponential backoff', () => {
  const calls = registrations({ COSMOS__accountEndpoint: 'https://acct.documents.azure.com:443/' });
  expect(calls.map((c) => c.name)).toEqual(['lockTelemetry']);
  expect(calls[0]?.options).toMatchObject({
    connection: 'COSMOS',
    leaseContainerName: 'leases',
    createLeaseContainerIfNotExists: false,
    retry: { strategy: 'exponentialBackoff', maxRetryCount: 10, minimumInterval: { seconds: 5 } },
  });
  expect(lockTelemetryRetry.maximumInterval).toEqual({ minutes: 5 });
});

test('a COSMOS connection string counts as configured too', () => {
  expect(
    registrations({ COSMOS: 'AccountEndpoint=https://acct.documents.azure.com:443/;AccountKey=x;' }),
  ).toHaveLength(1);
});

test('negative control: with the sample settings (empty endpoint) or none, nothing is registered', () => {
  expect(registrations({ COSMOS__accountEndpoint: '' })).toEqual([]);
  expect(registrations({ COSMOS__accountEndpoint: '   ' })).toEqual([]);
  expect(registrations({})).toEqual([]);
});
