import type { AccessToken, TokenCredential } from '@azure/identity';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { callParticipant } from '../../shared/migration/participantHttp';
import { realScheduler } from '../../shared/migration/scheduler';
import type { MigrationStatus } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { type ParticipantServer, startParticipant } from '../support/participantServer';
import { poll } from '../support/poll';
import { fastHostEnv } from '../support/timing';

/**
 * A participant configured with an `audience`, end to end on the embedded host: the workflow copies the
 * audience into each call, the in-process runner gets a token for it, and a participant that requires
 * the bearer token lets the migration complete. Without the audience it refuses (401) and the migration
 * fails — the control that shows the participant really checks.
 */

const FAST = {
  ...fastHostEnv,
  ROUTELOCK_RETRY_INTERVAL_SECONDS: '1',
  ROUTELOCK_RETRY_ATTEMPTS: '2',
  // one attempt: the control's refusal ends the migration (retries: test/migration/attempts.test.ts)
  ROUTELOCK_MIGRATION_ATTEMPTS: '1',
};

class FakeCredential implements TokenCredential {
  readonly scopes: string[] = [];
  async getToken(scopes: string | string[]): Promise<AccessToken> {
    this.scopes.push(...[scopes].flat());
    return { token: 'mi-token', expiresOnTimestamp: Date.now() + 3_600_000 };
  }
}

let participant: ParticipantServer;
let host: LocalHost;
afterEach(async () => {
  await host?.close();
  await participant?.close();
});

async function migrate(
  audience: string | undefined,
): Promise<{ status: MigrationStatus; credential: FakeCredential }> {
  participant = await startParticipant({ requireBearer: 'mi-token' });
  participant.behave('bulkCopy', { kind: 'poll', polls: 1 });
  const credential = new FakeCredential();
  host = await startLocalHost({
    env: {
      ...FAST,
      ROUTELOCK_PARTICIPANTS: JSON.stringify([
        { name: 'messages', url: participant.url, ...(audience === undefined ? {} : { audience }) },
      ]),
    },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
    http: (call) => callParticipant(call, realScheduler, { credential }),
  });
  const api = `${host.url}/api`;
  const json = { 'content-type': 'application/json' };
  await fetch(`${api}/routes/conv-1`, {
    method: 'PUT',
    headers: json,
    body: JSON.stringify({ location: { region: 'westeurope' } }),
  });
  const started = (await (
    await fetch(`${api}/migrations`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ resourceId: 'conv-1', target: { region: 'eastus' } }),
    })
  ).json()) as { statusUrl: string };
  const status = await poll(
    async () => (await (await fetch(`${host.url}${started.statusUrl}`)).json()) as MigrationStatus,
    (s) => !['Pending', 'Running'].includes(s.status),
  );
  return { status, credential };
}

test('with an audience: every participant request carries the token and the migration completes', async () => {
  const { status, credential } = await migrate('api://routelock-messages');
  expect(status.status).toBe('Completed');
  const steps = participant.requests.map((r) => `${r.method} ${r.step ?? ''} ${r.authorization}`.trim());
  expect(steps).toEqual(
    expect.arrayContaining([
      'POST bulkCopy Bearer mi-token',
      'GET  Bearer mi-token',
      'POST deltaCopy Bearer mi-token',
    ]),
  );
  expect(participant.requests.every((r) => r.authorization === 'Bearer mi-token')).toBe(true);
  expect(new Set(credential.scopes)).toEqual(new Set(['api://routelock-messages/.default']));
}, 30_000);

test('control: without an audience the participant refuses (401) and the migration fails', async () => {
  const { status, credential } = await migrate(undefined);
  expect(status.status).toBe('Failed');
  expect(participant.requests.length).toBeGreaterThan(0);
  expect(participant.requests.some((r) => r.authorization !== undefined)).toBe(false);
  expect(credential.scopes).toEqual([]);
}, 30_000);
