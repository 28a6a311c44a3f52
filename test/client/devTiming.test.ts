import { type LocalHost } from '../../local/host';
import {
  RoutingClient,
  type RoutingClientOptions,
  RoutingClientOptionError,
  withinGrace,
} from '../../shared/core/client';
import { startLocalHost } from '../support/localHost';

/**
 * A client against the embedded host's dev profile (in-flight grace 1 s, server join 0, a 2 s cache), on
 * the real clock. The client starts from the production timing and learns the host's at `ready()`, so
 * nobody copies settings by hand; a write on a view the cache would still serve needs no grace
 * (`validUntil`), and a write on a started lock commits within the grace of its resolve and no later.
 */

const SOURCE = { region: 'westeurope', account: 'chatweu01' };
const TARGET = { region: 'eastus', account: 'chatuse01' };
let host: LocalHost | undefined;
beforeAll(async () => {
  host = await startLocalHost({ env: { PORT: '0', ROUTELOCK_PROFILE: 'dev' }, log: () => undefined });
});
afterAll(async () => host?.close());
const api = () => `${host!.url}/api`;

/** Eight writes, each on a route of its own: resolve, 5 ms of work, then the grace check before committing. */
async function eightWrites(client: RoutingClient, prefix: string): Promise<number> {
  const ids = Array.from({ length: 8 }, (_, i) => `${prefix}-${i}`);
  for (const id of ids) await client.putRoute(id, SOURCE);
  let committed = 0;
  for (const id of ids) {
    const route = await client.resolveForWrite(id);
    await new Promise((r) => setTimeout(r, 5));
    if (withinGrace(route.resolvedAt, client.inFlightGraceSeconds, Date.now(), route.validUntil))
      committed += 1;
  }
  return committed;
}

test('a grace of 0 with the default 50 ms server join is refused when the client is built', () => {
  const error = (() => {
    try {
      return new RoutingClient({ baseUrl: api(), inFlightGraceSeconds: 0 } as RoutingClientOptions);
    } catch (e) {
      return e;
    }
  })();
  expect(error).toBeInstanceOf(RoutingClientOptionError);
  expect(error).toMatchObject({ option: 'serverCoalesceJoinMs' });
});

test('with no timing set, ready() learns the dev host’s: grace 1 s, server join 0, the cache capped at its 2 s', async () => {
  const client = new RoutingClient({ baseUrl: api() });
  expect(client.inFlightGraceSeconds).toBe(5); // the production profile until told
  await client.ready();
  expect(client.timingInForce()).toEqual({
    inFlightGraceSeconds: 1,
    clockSkewSeconds: 5, // the dev host's 0 would be looser: the production margin stays
    maxCacheSeconds: 2,
    serverCoalesceJoinMs: 0,
    coalesceJoinMs: 50, // with the server's 0, within the tenth of the grace both joins may take
  });
  expect(client.timingClamped).toEqual(['clockSkewSeconds: said 0, used 5']);
});

test('the dev settings copied by hand (grace 1 s, server join 0): 8 of 8 writes on unlocked routes commit', async () => {
  const client = new RoutingClient({ baseUrl: api(), inFlightGraceSeconds: 1, serverCoalesceJoinMs: 0 });
  expect(await eightWrites(client, 'conv-hand')).toBe(8);
});

test('the dev timing learnt at ready(): 8 of 8 writes on unlocked routes commit', async () => {
  const client = new RoutingClient({ baseUrl: api() });
  await client.ready();
  expect(await eightWrites(client, 'conv-learnt')).toBe(8);
});

test('on a started lock, a write within the learnt 1 s grace of its resolve commits and one past it is refused', async () => {
  const client = new RoutingClient({ baseUrl: api(), clockSkewSeconds: 0 });
  await client.ready();
  await client.putRoute('conv-locked', SOURCE);
  const grant = await client.prelock('conv-locked', { migrationId: 'm-dev', owner: 'test', target: TARGET });
  await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(grant.startsAt) - Date.now() + 10)));
  const route = await client.resolveForWrite('conv-locked');
  expect(route.view.lock).not.toBeNull();
  expect(route.validUntil).toBeUndefined(); // a started lock is never served from cache: only the grace counts
  await new Promise((r) => setTimeout(r, 5));
  const grace = client.inFlightGraceSeconds;
  expect(withinGrace(route.resolvedAt, grace, Date.now(), route.validUntil)).toBe(true);
  expect(withinGrace(route.resolvedAt, grace, route.resolvedAt + grace * 1000 + 1, route.validUntil)).toBe(
    false,
  );
}, 15_000);
