import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { ManualClock } from '../../testkit/clock';
import { ConfigError, parseConfig } from '../../shared/config';
import {
  TokenKeyring,
  loadTokenKeyFile,
  openTokenKeyring,
  parseTokenKeySet,
  rotateTokenKeySet,
} from '../../shared/core/security/tokenKeys';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { copiesOnly, virtualRunner } from '../support/migrationHarness';

/** The workflow's token key ring: where it comes from, how it is kept, and rotating it mid-migration. */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'routelock-keys-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

describe('the key set', () => {
  test('credentials derive from seed and key alone: same seed, same credentials; another key, others', () => {
    const ring = TokenKeyring.ephemeral();
    const seed = ring.newSeed();
    expect(ring.credentials(seed)).toEqual(ring.credentials({ ...seed }));
    expect(ring.credentials(seed).token).not.toBe(ring.credentials(seed).idempotencyKey);
    expect(ring.credentials(seed).token).not.toBe(ring.credentials(ring.newSeed()).token);
    const other = new TokenKeyring({ current: seed.keyId, keys: { [seed.keyId]: 'A'.repeat(43) } });
    expect(other.credentials(seed).token).not.toBe(ring.credentials(seed).token);
  });

  test('bad key sets are refused with a reason', () => {
    const bad = [
      'not json',
      '{"current":"k1","keys":{}}',
      '{"current":"k1","keys":{"k1":"c2hvcnQ"}}',
      '{"current":"k 1","keys":{"k 1":"' + 'A'.repeat(43) + '"}}',
    ];
    for (const raw of bad) expect(() => parseTokenKeySet(raw)).toThrow(/expected|not in keys|shorter|key id/);
  });

  test('ROUTELOCK_TOKEN_KEYS: a bad value names the variable and never echoes the value', () => {
    const secret = JSON.stringify({ current: 'k1', keys: { k1: 'c2VjcmV0LXNob3J0' } });
    try {
      parseConfig({ ROUTELOCK_TOKEN_KEYS: secret });
      throw new Error('accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/ROUTELOCK_TOKEN_KEYS: key "k1" is shorter than 32 bytes/);
      expect((error as Error).message).not.toContain('c2VjcmV0');
    }
  });

  test('in Azure the key set is required; the embedded host keeps a file beside its database', () => {
    expect(() => parseConfig({ WEBSITE_SITE_NAME: 'app', ROUTELOCK_STORE: 'sqlite' })).toThrow(
      /ROUTELOCK_TOKEN_KEYS: required in Azure/,
    );
    expect(parseConfig({ ROUTELOCK_SQLITE_PATH: '/var/lib/routelock/r.db' }).security.tokenKeys).toEqual({
      kind: 'file',
      path: '/var/lib/routelock/r.db'.replace('r.db', 'token-keys.json'),
    });
    expect(parseConfig({ ROUTELOCK_SQLITE_PATH: ':memory:' }).security.tokenKeys).toEqual({
      kind: 'ephemeral',
    });
    const set = JSON.stringify(rotateTokenKeySet());
    expect(parseConfig({ ROUTELOCK_TOKEN_KEYS: set }).security.tokenKeys.kind).toBe('ring');
  });

  test('a key ring never prints its keys', () => {
    const set = rotateTokenKeySet();
    const ring = new TokenKeyring(set);
    const material = Object.values(set.keys)[0] as string;
    expect(JSON.stringify({ ring })).not.toContain(material);
    expect(inspect(ring, { depth: 5, showHidden: true })).not.toContain(material);
    expect(JSON.stringify(parseConfig({ ROUTELOCK_TOKEN_KEYS: JSON.stringify(set) }))).not.toContain(
      material,
    );
  });
});

describe('the key file', () => {
  test('created owner-only when absent, and the same keys on the next start', () => {
    const path = join(dir, 'keys', 'token-keys.json');
    const first = loadTokenKeyFile(path);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'keys')).mode & 0o777).toBe(0o700);
    const again = openTokenKeyring({ kind: 'file', path });
    const seed = first.newSeed();
    expect(again.credentials(seed)).toEqual(first.credentials(seed));
  });

  test('refused when others may read it', () => {
    const path = join(dir, 'token-keys.json');
    writeFileSync(path, JSON.stringify(rotateTokenKeySet()));
    chmodSync(path, 0o644);
    expect(() => loadTokenKeyFile(path)).toThrow(
      /readable or writable by others \(mode 644\); run chmod 600/,
    );
    chmodSync(path, 0o600);
    expect(() => loadTokenKeyFile(path)).not.toThrow();
  });

  test('a planted key file is refused: a link, a folder others may write, a file another user owns', () => {
    const real = join(dir, 'real.json');
    writeFileSync(real, JSON.stringify(rotateTokenKeySet()), { mode: 0o600 });
    const link = join(dir, 'link.json');
    symlinkSync(real, link);
    expect(() => loadTokenKeyFile(link)).toThrow(/must be a regular file, not a link/);

    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o1777); // like /tmp
    expect(() => loadTokenKeyFile(join(shared, 'token-keys.json'))).toThrow(/nobody else may write/);

    if (process.getuid?.() === 0) {
      // (as root, CI's case) a file someone else prepared, mode bits and all, is still not ours
      const planted = join(dir, 'planted.json');
      writeFileSync(planted, JSON.stringify(rotateTokenKeySet()), { mode: 0o600 });
      chownSync(planted, 65534, 65534);
      expect(() => loadTokenKeyFile(planted)).toThrow(/belongs to uid 65534, not this user/);
    }
    expect(() => loadTokenKeyFile(real)).not.toThrow(); // the control: our own file loads
  });

  test('the databases: another user’s file is refused, our own older 0644 file is tightened', () => {
    const own = join(dir, 'own.db');
    writeFileSync(own, '', { mode: 0o644 });
    chmodSync(own, 0o644);
    new SqliteStore(own).close();
    expect(statSync(own).mode & 0o777).toBe(0o600);
    if (process.getuid?.() === 0) {
      const planted = join(dir, 'planted.db');
      writeFileSync(planted, '', { mode: 0o600 });
      chownSync(planted, 65534, 65534);
      expect(() => new SqliteStore(planted)).toThrow(/belongs to uid 65534/);
    }
    expect(() => new SqliteStore(join(dir, 'link.db'))).not.toThrow();
    symlinkSync(own, join(dir, 'alias.db'));
    expect(() => new SqliteStore(join(dir, 'alias.db'))).toThrow(/not a link/);
  });

  test('two processes creating it at once end with one key set', async () => {
    const path = join(dir, 'token-keys.json');
    const rings = await Promise.all(
      Array.from({ length: 8 }, () => Promise.resolve().then(() => loadTokenKeyFile(path))),
    );
    expect(new Set(rings.map((r) => r.currentKeyId)).size).toBe(1);
    const written = JSON.parse(readFileSync(path, 'utf8')) as { keys: Record<string, string> };
    expect(Object.keys(written.keys)).toHaveLength(1);
  });
});

describe('rotation', () => {
  /** A migration taken under `before`, stopped mid-copy, resumed by a runner holding `after`. */
  async function resumeUnder(after: (old: ReturnType<typeof rotateTokenKeySet>) => TokenKeyring) {
    const statePath = join(dir, 'state.db');
    const store = new SqliteStore(join(dir, 'routes.db'));
    const clock = new ManualClock();
    const oldSet = rotateTokenKeySet(undefined, new Date('2026-11-01'));
    let copies = 0;
    const h1 = virtualRunner({
      store,
      statePath,
      clock,
      keyring: new TokenKeyring(oldSet),
      env: { ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]) },
      // the bulk copy never answers: the process stops while it runs
      http: () => {
        copies += 1;
        h1.runner.stop();
        return new Promise(() => undefined);
      },
    });
    await h1.router.createRoute('conv-r', SOURCE);
    const { record } = h1.runner.start({ resourceId: 'conv-r', target: TARGET });
    await h1.scheduler.runWhile(() => copies === 0);
    expect((await h1.store.read('conv-r', { from: 'writeRegion' })).doc.lock?.phase).toBe('hardDelete');

    const ring = after(oldSet);
    const h2 = virtualRunner({
      store,
      statePath,
      clock,
      keyring: ring,
      env: { ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]) },
      http: copiesOnly(async () => ({ status: 200, body: null })),
    });
    expect(h2.runner.resumeAll()).toBe(1);
    await h2.settle();
    return { h2, record, ring, oldSet };
  }

  test('a key added and made current strands nothing: the running migration completes on its old key', async () => {
    const { h2, record, ring, oldSet } = await resumeUnder((old) => new TokenKeyring(rotateTokenKeySet(old)));
    expect(await h2.runner.status(record.migrationId)).toMatchObject({ status: 'Completed' });
    expect(ring.currentKeyId).not.toBe(oldSet.current);
    // new migrations take the new key
    await h2.router.createRoute('conv-n', SOURCE);
    const started = h2.runner.start({ resourceId: 'conv-n', target: TARGET, migrationId: 'm-new' });
    expect(started.created).toBe(true);
    expect(started.record.input.lock.keyId).toBe(ring.currentKeyId);
  });

  test('negative control: the old key removed too early fails the migration with the reason', async () => {
    const { h2, record } = await resumeUnder(() => TokenKeyring.ephemeral());
    const status = await h2.runner.status(record.migrationId);
    expect(status.status).toBe('Failed');
    expect(status.error).toMatch(/is not in the key ring/);
  });
});

describe('configuration errors never print a credential', () => {
  const messageOf = (env: Record<string, string>) => {
    try {
      parseConfig(env);
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('accepted');
  };
  const material = 'c2VjcmV0LW1hdGVyaWFsLXRoYXQtaXMtbG9uZy1lbm91Z2g';
  test.each([
    [
      'a key pasted as a key id',
      { ROUTELOCK_TOKEN_KEYS: `{"current":"${material}==","keys":{"${material}==":"x"}}` },
    ],
    ['a key pasted as current', { ROUTELOCK_TOKEN_KEYS: `{"current":"${material}=","keys":{}}` }],
    [
      'a connection string in COSMOS_ENDPOINT',
      { ROUTELOCK_STORE: 'cosmos', COSMOS_ENDPOINT: `AccountEndpoint=https://a/;AccountKey=${material}==;` },
    ],
  ])('%s', (_name, env) => {
    const message = messageOf(env);
    expect(message).toMatch(/ROUTELOCK_TOKEN_KEYS|COSMOS_ENDPOINT/);
    expect(message).not.toContain(material);
  });
  test('the control: an ordinary bad value is still quoted, to help', () => {
    expect(messageOf({ ROUTELOCK_STORE: 'cosmos', COSMOS_ENDPOINT: 'not-a-url' })).toContain('not-a-url');
  });
});
