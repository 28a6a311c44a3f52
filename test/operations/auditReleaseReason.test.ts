import { auditRecordFor, auditRecordsRecoverableFrom } from '../../shared/core/audit';
import { RouteLockError } from '../../shared/core/errors';
import type { LocationDocument } from '../../shared/core/lock/document';
import {
  MAX_RELEASE_REASON_CHARS,
  boundedReleaseReason,
  checkedReleaseReason,
} from '../../shared/core/lock/rules';
import { redactCredentials } from '../../shared/core/redact';
import type { LockGrant } from '../../shared/core/lock/view';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { call, handlerServices } from '../support/handlers';

/**
 * A release records why (`lastChange.reason`, and a full release's `lastMigration.reason`),
 * and the audit record of the release carries the reason and the phases reached, the same record from
 * the write path and from the change feed's backstop. A reason is one line of bounded text with no
 * credential; a caller's bad one is a 400 that changes nothing.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
const seed = TokenKeyring.ephemeral();
const { token, idempotencyKey } = seed.credentials(seed.newSeed());

describe('checkedReleaseReason: the one rule of a release reason', () => {
  const ok: [string, unknown, string | undefined][] = [
    ['absent', undefined, undefined],
    ['text, trimmed', '  participant failed  ', 'participant failed'],
    ['exactly the limit', 'x'.repeat(MAX_RELEASE_REASON_CHARS), 'x'.repeat(MAX_RELEASE_REASON_CHARS)],
    [
      'a migration id (a uuid) stays',
      'm-3f2a9c1e-7b4d-4e1a-9a0b-2c3d4e5f6a7b failed',
      'm-3f2a9c1e-7b4d-4e1a-9a0b-2c3d4e5f6a7b failed',
    ],
    ['a fencing token is redacted', `oops ${token} pasted`, 'oops [redacted] pasted'],
    ['an Idempotency-Key is redacted', `key=${idempotencyKey}`, 'key=[redacted]'],
    ['a token hash (64 hex) is redacted', `hash ${'ab12'.repeat(16)}`, 'hash [redacted]'],
  ];
  test.each(ok)('%s', (_name, reason, expected) => {
    expect(checkedReleaseReason('r-1', reason)).toBe(expected);
  });

  const bad: [string, unknown][] = [
    ['not text', 42],
    ['empty once trimmed', '   '],
    ['one past the limit', 'x'.repeat(MAX_RELEASE_REASON_CHARS + 1)],
    ['a line break', 'first\nsecond'],
    ['a control character', 'bell\u0007'],
  ];
  test.each(bad)('400 BadRequest: %s', (_name, reason) => {
    expect(() => checkedReleaseReason('r-1', reason)).toThrow(
      expect.objectContaining({ code: 'BadRequest' }) as RouteLockError,
    );
  });

  test('boundedReleaseReason makes any text one the rule accepts: flattened, cut, redacted', () => {
    const long = `deltaCopy: ParticipantFailed:\n${'detail '.repeat(200)} ${token}`;
    const bounded = boundedReleaseReason(long);
    expect(bounded).toHaveLength(MAX_RELEASE_REASON_CHARS);
    expect(bounded.endsWith('…')).toBe(true);
    expect(checkedReleaseReason('r-1', bounded)).toBe(bounded);
    expect(boundedReleaseReason(`a\tb\n\nc ${token}`)).toBe('a b c [redacted]');
    expect(redactCredentials(token)).toBe('[redacted]');
  });

  // A guard against accidents, not a boundary (shared/core/redact.ts): these are the accidents.
  const arm = '/subscriptions/0000/resourceGroups/MyRG/providers/Microsoft.Web/sites/app1/slots/staging';
  const base64WithSlash = 'q1Z/3vB8xYkP0tR7wL2mN9sD4fG6hJ+cVbKaEoUiQzA=';
  const redacted: [string, string, string][] = [
    ['a token split by U+200B', `x ${token.slice(0, 20)}\u200b${token.slice(20)}`, 'x [redacted]'],
    ['a token split by U+00AD', `x ${token.slice(0, 20)}\u00ad${token.slice(20)}`, 'x [redacted]'],
    ['an ARM resource id stays', `moved ${arm}`, `moved ${arm}`],
    ['an ARM id, whatever its case', `moved ${arm.toLowerCase()}`, `moved ${arm.toLowerCase()}`],
    [
      'an ARM URL stays',
      `GET https://management.azure.com${arm}?api-version=2023-01-01 failed`,
      `GET https://management.azure.com${arm}?api-version=2023-01-01 failed`,
    ],
    ['a base64 token holding / is redacted', `key ${base64WithSlash} x`, 'key [redacted] x'],
    ['a base64 token led by /', `key /${base64WithSlash}`, 'key [redacted]'],
    ['a token as an ARM id name is redacted', `${arm}/${token}/x`, `${arm}/[redacted]/x`],
    // what people write reads as written, not [redacted]
    [
      'a hyphenated CamelCase id',
      'superseded by Migrate-ContosoRetail-Orders-20261130',
      'superseded by Migrate-ContosoRetail-Orders-20261130',
    ],
    [
      "a participant's problem type",
      'type https://contoso.example/problems/DeltaCopyTimeout',
      'type https://contoso.example/problems/DeltaCopyTimeout',
    ],
    [
      'a dotted resource type',
      'Microsoft.DocumentDB/databaseAccounts/routelock-prod failed',
      'Microsoft.DocumentDB/databaseAccounts/routelock-prod failed',
    ],
    ['a hex hash among words is still redacted', `Orders-${'ab12'.repeat(10)}-x`, '[redacted]'],
  ];
  test('negative control: 2,000 random 32-byte tokens (base64 and base64url) are every one redacted', () => {
    const { randomBytes } = jest.requireActual<typeof import('node:crypto')>('node:crypto');
    for (let i = 0; i < 2000; i += 1) {
      const random = randomBytes(32).toString(i % 2 ? 'base64url' : 'base64');
      expect([random, redactCredentials(`x ${random} y`)]).toEqual([random, 'x [redacted] y']);
    }
  });
  test.each(redacted)('redactCredentials and boundedReleaseReason: %s', (_name, text, expected) => {
    expect(redactCredentials(text)).toBe(expected);
    expect(boundedReleaseReason(text)).toBe(expected);
  });
});

describe('a release with a reason, through the router, and its audit record', () => {
  async function lockedRoute() {
    const ledger = new SqliteAuditLedger(':memory:');
    const store = new SqliteStore(':memory:');
    const versions: LocationDocument[] = [];
    store.onChange((doc) => versions.push(doc));
    const { services, clock } = await handlerServices({}, store, { audit: ledger });
    await services.router.createRoute('r-1', SOURCE);
    const grant = await services.router.prelock('r-1', { migrationId: 'm-1', owner: 'o', target: TARGET });
    clock.set(Date.parse(grant.startsAt) + 60_000);
    await services.router.escalate('r-1', { token: grant.token!, phase: 'hardDelete' });
    const read = async () => store.read('r-1', { from: 'writeRegion' });
    return { services, clock, ledger, versions, grant, read };
  }

  test('the version carries the reason; the ledger record carries it and the phases reached', async () => {
    const { services, ledger, grant, read } = await lockedRoute();
    await services.router.release('r-1', {
      token: grant.token!,
      reason: 'bulkCopy: ParticipantFailed: disk full',
    });
    const { doc } = await read();
    expect(doc.lastChange).toMatchObject({ op: 'release', reason: 'bulkCopy: ParticipantFailed: disk full' });
    expect(doc.lastMigration?.reason).toBe('bulkCopy: ParticipantFailed: disk full');
    const [record] = await ledger.list('r-1', 10);
    expect(record).toMatchObject({
      op: 'release',
      reason: 'bulkCopy: ParticipantFailed: disk full',
      phasesReached: ['prelock', 'hardDelete'],
    });
  });

  test('the write path and the backstop make the same record (a later version rebuilds it)', async () => {
    const { services, ledger, versions, grant } = await lockedRoute();
    await services.router.release('r-1', { token: grant.token!, reason: 'Cancelled: cancelled by op-1' });
    const released = versions[versions.length - 1]!;
    // the next migration's pre-lock: the feed may deliver only this version, skipping the release
    await services.router.prelock('r-1', { migrationId: 'm-2', owner: 'o', target: TARGET });
    const later = versions[versions.length - 1]!;
    const own = auditRecordFor(released);
    const rebuilt = auditRecordsRecoverableFrom(later);
    expect(own).not.toBeNull();
    expect(rebuilt).toEqual([own]);
    expect((await ledger.list('r-1', 10)).filter((r) => r.op === 'release')).toEqual([own]);
    // negative control: without the reason in lastMigration the backstop's record would differ
    const { reason: _dropped, ...withoutReason } = later.lastMigration!;
    expect(auditRecordsRecoverableFrom({ ...later, lastMigration: withoutReason })).not.toEqual([own]);
  });

  test('a downgrade records its reason on the version only; the swap record has no reason', async () => {
    const { services, clock, grant, read, ledger } = await lockedRoute();
    const w = (await services.router.escalate('r-1', { token: grant.token!, phase: 'write' })) as LockGrant;
    await services.router.release('r-1', {
      token: grant.token!,
      phase: 'write',
      writeAt: w.writeAt,
      reason: 'WriteBudgetExceeded: delta overran',
    });
    expect((await read()).doc.lastChange).toMatchObject({
      op: 'downgrade',
      reason: 'WriteBudgetExceeded: delta overran',
    });
    const w2 = (await services.router.escalate('r-1', { token: grant.token!, phase: 'write' })) as LockGrant;
    clock.set(Date.parse(w2.writeAt!) + 1000);
    await services.router.swap('r-1', { token: grant.token!, writeAt: w2.writeAt });
    const [swap] = await ledger.list('r-1', 10);
    expect(swap).toMatchObject({
      op: 'swap',
      reason: null,
      phasesReached: ['prelock', 'hardDelete', 'write', 'swapped'],
    });
  });

  test('a bad reason through the router: BadRequest and the document unchanged', async () => {
    const { services, grant, read } = await lockedRoute();
    const before = await read();
    await expect(
      services.router.release('r-1', {
        token: grant.token!,
        reason: 'x'.repeat(MAX_RELEASE_REASON_CHARS + 1),
      }),
    ).rejects.toMatchObject({ code: 'BadRequest' });
    expect((await read()).etag).toBe(before.etag);
  });
});

describe('POST /routes/{id}/release with a reason', () => {
  async function locked() {
    const store = new SqliteStore(':memory:');
    const { clock } = await handlerServices({}, store);
    await call('putRoute', { params: { id: 'r-1' }, body: { location: SOURCE } });
    const res = await call('prelock', {
      params: { id: 'r-1' },
      body: { migrationId: 'm-1', owner: 'o', target: TARGET },
    });
    const grant = res.body as LockGrant;
    clock.set(Date.parse(grant.startsAt) + 60_000);
    const read = async () => store.read('r-1', { from: 'writeRegion' });
    return { grant, read };
  }

  const bad: [string, unknown][] = [
    ['too long', 'x'.repeat(MAX_RELEASE_REASON_CHARS + 1)],
    ['not text', { why: 'object' }],
    ['a number', 7],
    ['a line break', 'a\nb'],
  ];
  test.each(bad)('%s: 400 problem, nothing written', async (_name, reason) => {
    const { grant, read } = await locked();
    const before = await read();
    const res = await call('release', { params: { id: 'r-1' }, body: { token: grant.token, reason } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.body).toMatchObject({ code: 'BadRequest' });
    expect(JSON.stringify(res.body)).not.toContain(grant.token!);
    expect((await read()).etag).toBe(before.etag);
    expect((await read()).doc.lock).not.toBeNull();
  });

  test('a good reason: 200, stamped on the version', async () => {
    const { grant, read } = await locked();
    const res = await call('release', {
      params: { id: 'r-1' },
      body: { token: grant.token, reason: 'operator abort: maintenance' },
    });
    expect(res.status).toBe(200);
    expect((await read()).doc.lastChange).toMatchObject({
      op: 'release',
      reason: 'operator abort: maintenance',
    });
  });
});
