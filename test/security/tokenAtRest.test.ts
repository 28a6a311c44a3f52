import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LocalHost } from '../../local/host';
import { startLocalHost } from '../support/localHost';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import type { MigrationStatus } from '../../shared/migration/types';
import { type ParticipantServer, startParticipant } from '../support/participantServer';
import { poll } from '../support/poll';
import { fastHostEnv } from '../support/timing';

/**
 * Tokens at rest (docs/design.md §9.3): nothing that stores orchestration state may hold a usable token.
 * A whole migration on the embedded host, file-backed, then every byte it left (database, WAL, shared
 * memory, key file folder), every log and telemetry line and every answer is searched for the migration's
 * fencing token and Idempotency-Key, which the test derives as the activities do.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };

let dir: string;
let host: LocalHost | undefined;
let participant: ParticipantServer | undefined;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'routelock-at-rest-'));
});
afterEach(async () => {
  await host?.close();
  await participant?.close();
  host = undefined;
  participant = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** Every file under `root`, as bytes read as latin1 text (a token is ASCII, so it shows as itself). */
function filesUnder(root: string): { path: string; text: string; mode: number }[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => {
      const path = join(entry.parentPath, entry.name);
      return { path, text: readFileSync(path).toString('latin1'), mode: statSync(path).mode & 0o777 };
    });
}

const found = (haystacks: { where: string; text: string }[], needles: Record<string, string>) =>
  haystacks.flatMap(({ where, text }) =>
    Object.entries(needles)
      .filter(([, needle]) => text.includes(needle))
      .map(([name]) => `${name} in ${where}`),
  );

test('after a full migration no token or Idempotency-Key is on disk, in a log line or in an answer', async () => {
  participant = await startParticipant();
  const lines: string[] = [];
  host = await startLocalHost({
    env: {
      ...fastHostEnv,
      ROUTELOCK_SQLITE_PATH: join(dir, 'data', 'routelock.db'),
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: participant.url }]),
    },
    log: (level, message, fields) => lines.push(JSON.stringify({ level, message, fields })),
  });
  const api = `${host.url}/api`;
  const send = (method: string, path: string, body?: unknown) =>
    fetch(`${api}${path}`, {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  await send('PUT', '/routes/conv-1', { location: SOURCE });
  const startText = await (
    await send('POST', '/migrations', { resourceId: 'conv-1', target: TARGET })
  ).text();
  const { migrationId, statusUrl } = JSON.parse(startText) as { migrationId: string; statusUrl: string };
  const status = await poll(
    async () => (await (await fetch(`${host!.url}${statusUrl}`)).json()) as MigrationStatus,
    (s) => !['Pending', 'Running'].includes(s.status),
  );
  expect(status.status).toBe('Completed');

  const record = await host.state.get(migrationId);
  const { token, idempotencyKey } = host.services.keyring.credentials(record!.input.lock);
  const answers = [
    startText,
    JSON.stringify(status),
    await (await fetch(`${api}/routes/conv-1`)).text(),
    await (await fetch(`${api}/migrations`)).text(),
    await (await fetch(`${api}/metrics`)).text(),
  ];
  await host.close();
  host = undefined;

  const files = filesUnder(dir);
  expect(files.map((f) => f.path.slice(dir.length))).toEqual(
    expect.arrayContaining(['/data/routelock.db', '/data/token-keys.json']),
  );
  const needles = { token, idempotencyKey };
  expect(
    found(
      [
        ...files.map((f) => ({ where: f.path, text: f.text })),
        { where: 'the log and telemetry lines', text: lines.join('\n') },
        { where: 'the answers', text: answers.join('\n') },
        { where: 'the participant requests', text: JSON.stringify(participant.requests) },
      ],
      needles,
    ),
  ).toEqual([]);
  expect(lines.length).toBeGreaterThan(5); // the log was really captured
  // Owner-only files: the database, its WAL and shared memory, the key file.
  expect(files.filter((f) => f.mode !== 0o600).map((f) => `${f.path} ${f.mode.toString(8)}`)).toEqual([]);
  expect(statSync(join(dir, 'data')).mode & 0o777).toBe(0o700);
});

describe('negative controls for the scan', () => {
  const planted = 'PLANTED-TOKEN-0123456789abcdefghijklmnop';

  test('a token journaled in the clear is found in the files', () => {
    const path = join(dir, 'state.db');
    const state = new SqliteMigrationState(path);
    state.append('m-1', '0', { value: { token: planted } });
    expect(
      found(
        filesUnder(dir).map((f) => ({ where: f.path, text: f.text })),
        { planted },
      ),
    ).not.toEqual([]);
    state.close();
  });

  test('a finished migration leaves no copy of its journal: with secure_delete off, one stays', async () => {
    const path = join(dir, 'state.db');
    const state = new SqliteMigrationState(path);
    const input = {
      migrationId: 'm-1',
      instanceId: 'migrate-conv-1',
      resourceId: 'conv-1',
      target: TARGET,
      settings: {} as never,
      lock: { keyId: 'k1', nonce: 'n' },
    };
    const status = {
      migrationId: 'm-1',
      resourceId: 'conv-1',
      status: 'Completed',
      phase: 'swapped',
      target: TARGET,
      timeline: { prelockAt: null, hardDeleteAt: null, writeAt: null, swappedAt: null },
    } as MigrationStatus;
    await state.create({
      migrationId: 'm-1',
      instanceId: input.instanceId,
      resourceId: 'conv-1',
      target: TARGET,
      createdAt: new Date().toISOString(),
      input,
      status,
      done: false,
    });
    state.append('m-1', '0', { value: { token: planted } });
    await state.saveStatus('m-1', status, true); // the runner's last write drops the journal
    state.close();
    expect(
      found(
        filesUnder(dir).map((f) => ({ where: f.path, text: f.text })),
        { planted },
      ),
    ).toEqual([]);

    // the control: the same delete without secure_delete leaves the bytes in the file
    const raw = new Database(join(dir, 'plain.db'));
    raw.pragma('secure_delete = OFF');
    raw.exec('CREATE TABLE t (v TEXT)');
    raw.prepare('INSERT INTO t VALUES (?)').run(planted);
    raw.exec('DELETE FROM t');
    raw.close();
    expect(readFileSync(join(dir, 'plain.db')).toString('latin1')).toContain(planted);
  });
});
