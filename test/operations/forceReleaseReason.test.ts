import { MAX_RELEASE_REASON_CHARS } from '../../shared/core/lock/rules';
import type { LockGrant } from '../../shared/core/lock/view';
import type { ForceReleaseRequest } from '../../shared/core/audit';
import { openRequest } from '../../shared/core/forceRelease';
import { SqliteAuditLedger } from '../../shared/core/store/sqlite/audit';
import { SqliteForceReleaseRequests } from '../../shared/core/store/sqlite/forceRelease';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { lockTelemetry } from '../../shared/migration/telemetry/lockTelemetry';
import { call, handlerServices } from '../support/handlers';
import { type TestPrincipal, allRoles } from '../support/principals';

/**
 * Both ways a lock ends with a caller's reason go through the one rule (checkedReleaseReason):
 * POST /routes/{id}/release and a force-release (its request's reason, then the release two approvals
 * run). A bad reason is a 400 problem before anything is stored; a credential-like run is redacted
 * before the request, the version, the ledger or the LockReleased event can hold it.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };
const approver = (n: string): TestPrincipal => ({
  oid: `00000000-0000-4000-8000-0000000000${n}`,
  name: `approver ${n}`,
  roles: allRoles.roles,
});

async function lockedRoute() {
  const store = new SqliteStore(':memory:');
  const audit = new SqliteAuditLedger(':memory:');
  const { clock } = await handlerServices({ ROUTELOCK_AUTH: 'appservice' }, store, { audit });
  await call('putRoute', { params: { id: 'r-1' }, body: { location: SOURCE } });
  const res = await call('prelock', {
    params: { id: 'r-1' },
    body: { migrationId: 'm-1', owner: 'o', target: TARGET },
  });
  const grant = res.body as LockGrant;
  clock.set(Date.parse(grant.startsAt) + 60_000);
  const read = async () => store.read('r-1', { from: 'writeRegion' });
  return { grant, read, audit };
}

interface Path {
  /** Ends the lock with `reason`; the HTTP answer of the call that takes the reason. */
  end(reason: unknown, grant: LockGrant): Promise<{ status: number; body: unknown; text: string }>;
}

const paths: Record<'release' | 'force-release', Path> = {
  release: {
    end: (reason, grant) => call('release', { params: { id: 'r-1' }, body: { token: grant.token, reason } }),
  },
  'force-release': {
    async end(reason) {
      const opened = await call('openForceRelease', { params: { id: 'r-1' }, body: { reason } });
      if (opened.status !== 201) return opened;
      const requestId = (opened.body as ForceReleaseRequest).id;
      for (const who of ['a2', 'a3']) {
        const approved = await call('approveForceRelease', {
          params: { requestId },
          principal: approver(who),
        });
        expect(approved.status).toBe(200);
      }
      // what an Ops.Read caller sees of the request while it ran
      return call('getForceRelease', { params: { requestId } });
    },
  },
};

const token = 'Qk9HVVMtdG9rZW4tZm9yLWEtdGVzdC1vbmx5LWFhYWFhYWE';
const bad: [string, unknown][] = [
  ['too long', 'x'.repeat(MAX_RELEASE_REASON_CHARS + 1)],
  ['a line break', 'stuck\nsecond line'],
  ['a control character', 'bell\u0007'],
  ['an invisible format character (U+200B)', `stuck ${token.slice(0, 20)}\u200b${token.slice(20)}`],
  ['a soft hyphen (U+00AD)', `stuck ${token.slice(0, 20)}\u00ad${token.slice(20)}`],
  ['only white space', '   '],
  ['not text', 42],
];
const good: [string, string, string][] = [
  ['plain text, trimmed', '  participant stuck  ', 'participant stuck'],
  [
    'a pasted token is redacted',
    `stuck; token=${token} said the participant`,
    'stuck; token=[redacted] said the participant',
  ],
  [
    'an ARM resource id stays',
    'moved /subscriptions/0000/resourceGroups/MyRG/providers/Microsoft.Web/sites/app1',
    'moved /subscriptions/0000/resourceGroups/MyRG/providers/Microsoft.Web/sites/app1',
  ],
];

describe.each(Object.keys(paths) as (keyof typeof paths)[])('%s: the one release-reason rule', (name) => {
  const path = paths[name];

  test.each(bad)('%s: 400 problem, nothing stored', async (_case, reason) => {
    const { grant, read, audit } = await lockedRoute();
    const before = await read();
    const ledgerBefore = await audit.list('r-1', 100);
    const res = await path.end(reason, grant);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'BadRequest' });
    expect((await read()).etag).toBe(before.etag);
    expect(await audit.list('r-1', 100)).toEqual(ledgerBefore);
  });

  test.each(good)('%s', async (_case, reason, stored) => {
    const { grant, read, audit } = await lockedRoute();
    const res = await path.end(reason, grant);
    expect(res.status).toBe(200);
    expect(res.text).not.toContain(token);
    const { doc } = await read();
    expect(doc.lock).toBeNull();
    expect(doc.lastChange).toMatchObject({ reason: stored });
    const ledger = JSON.stringify(await audit.list('r-1', 100));
    expect(ledger).not.toContain(token);
    expect(ledger).toContain(JSON.stringify(stored).slice(1, -1));
    const released = lockTelemetry(doc, 0, 'v1').events.find((e) => e.name === 'LockReleased');
    expect(JSON.stringify(released)).not.toContain(token);
    if (name === 'force-release') expect((res.body as ForceReleaseRequest).reason).toBe(stored);
  });
});

test('a request stored raw before the rule (a pasted token) is shown and released redacted', async () => {
  const store = new SqliteStore(':memory:');
  const forceReleaseRequests = new SqliteForceReleaseRequests(':memory:');
  const { clock } = await handlerServices({ ROUTELOCK_AUTH: 'appservice' }, store, { forceReleaseRequests });
  await call('putRoute', { params: { id: 'r-1' }, body: { location: SOURCE } });
  await call('prelock', { params: { id: 'r-1' }, body: { migrationId: 'm-1', owner: 'o', target: TARGET } });
  const raw = openRequest({
    id: 'fr-legacy',
    resourceId: 'r-1',
    migrationId: 'm-1',
    actor: allRoles.oid,
    reason: `stuck; token=${token}`,
    now: clock.now(),
  });
  await forceReleaseRequests.create(raw);
  const shown = await call('getForceRelease', { params: { requestId: 'fr-legacy' } });
  expect(shown.status).toBe(200);
  expect((shown.body as ForceReleaseRequest).reason).toBe('stuck; token=[redacted]');
  for (const who of ['a2', 'a3'])
    await call('approveForceRelease', { params: { requestId: 'fr-legacy' }, principal: approver(who) });
  const { doc } = await store.read('r-1', { from: 'writeRegion' });
  expect(doc.lock).toBeNull();
  expect(doc.lastChange).toMatchObject({ op: 'forceRelease', reason: 'stuck; token=[redacted]' });
});
