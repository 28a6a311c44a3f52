import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MigrationStatus } from '../../shared/migration/types';
import { type ParticipantServer, startParticipant } from '../support/participantServer';
import { type SpawnedHost, spawnHost } from '../support/spawnHost';
import { poll } from '../support/poll';

/** SIGKILL the embedded host in the middle of the hard-delete phase; the restarted host resumes. */

const dir = mkdtempSync(join(tmpdir(), 'routelock-crash-'));
let participant: ParticipantServer;
afterAll(async () => {
  await participant?.close();
  rmSync(dir, { recursive: true, force: true });
});

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

test('killed mid-hard-delete: the restarted host resumes the migration from its journal, never a half-moved route', async () => {
  participant = await startParticipant();
  participant.behave('bulkCopy', { kind: 'hold' });
  const env = {
    ROUTELOCK_SQLITE_PATH: join(dir, 'routes.db'),
    ROUTELOCK_PROFILE: 'dev',
    ROUTELOCK_CACHE_TIERS: 'local=1',
    ROUTELOCK_REPLICATION_BOUND_SECONDS: '0',
    ROUTELOCK_SAFETY_BUFFER_SECONDS: '0',
    ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: participant.url }]),
  };
  let host: SpawnedHost = await spawnHost(env);
  const json = { 'content-type': 'application/json' };
  await fetch(`${host.url}/api/routes/conv-c`, {
    method: 'PUT',
    headers: json,
    body: JSON.stringify({ location: SOURCE }),
  });
  const started = (await (
    await fetch(`${host.url}/api/migrations`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ resourceId: 'conv-c', target: TARGET }),
    })
  ).json()) as { migrationId: string; statusUrl: string };
  const status = (h: SpawnedHost) => async () =>
    (await (await fetch(`${h.url}${started.statusUrl}`)).json()) as MigrationStatus;
  await poll(status(host), (s) => s.phase === 'hardDelete');
  await poll(
    async () => participant.requests.filter((r) => r.method === 'GET').length,
    (n) => n >= 1,
  );

  host.child.kill('SIGKILL');
  await host.exited;
  const beforeRestart = participant.requests.length;

  host = await spawnHost(env);
  try {
    const during = (await (await fetch(`${host.url}/api/routes/conv-c`)).json()) as {
      location: unknown;
      lock: { phase: string };
    };
    expect(during).toMatchObject({ location: SOURCE, lock: { phase: 'hardDelete' } });
    expect(host.output()).toContain('resumed 1 unfinished migration');
    participant.release();
    const done = await poll(status(host), (s) => s.status !== 'Running');
    expect(done).toMatchObject({ status: 'Completed', migrationId: started.migrationId });
    const after = (await (await fetch(`${host.url}/api/routes/conv-c`)).json()) as {
      location: unknown;
      lock: unknown;
    };
    expect(after).toMatchObject({ location: TARGET, lock: null });
    // one bulk-copy job: the resumed run polls the same job's Location, kept in its journal (protocol
    // v2; version 1 POSTed the job again)
    const posts = participant.requests.filter((r) => r.method === 'POST' && r.step === 'bulkCopy');
    expect(posts).toHaveLength(1);
    expect(new Set(posts.map((p) => p.migrationId))).toEqual(new Set([started.migrationId]));
    const resumedPolls = participant.requests.slice(beforeRestart).filter((r) => r.method === 'GET');
    expect(resumedPolls.length).toBeGreaterThanOrEqual(1);
    expect(new Set(resumedPolls.map((r) => r.path))).toEqual(new Set(['/jobs/1']));
  } finally {
    host.child.kill('SIGTERM');
    await host.exited;
  }
}, 60_000);
