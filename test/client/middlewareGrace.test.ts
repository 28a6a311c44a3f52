import { TestRoutingClient, states } from '../../shared/core/clientTesting';
import { ManualClock } from '../../testkit/clock';
import { type AppState, type Framework, call, frameworks, startApp } from './middlewareApps';

/**
 * The commit check (docs/design.md §5.4, §5.6): the guard decides before the handler runs, so a write
 * whose handler takes longer than the in-flight grace must not commit on that decision, since a write
 * lock may have begun meanwhile that its copies would miss. The handler asks `guard.commitOk(req)` just
 * before committing and answers `guard.late(res)` (503 `GraceExpired`, nothing written) when it says no.
 *
 * The check the tests apply, written from the design and not from the guard: no write decided before the
 * write lock began lands under it later than the grace after it was decided (the write lock's copies wait
 * out that grace, and no longer). The negative control, a handler that skips `commitOk`, is caught
 * committing such a write after the write lock began.
 */

const [from, to] = ['westeurope', 'eastus'];
const id = 'conv-1';

/** Writes decided at `decidedAt` that landed under the lock past the grace: what the lock's copies miss. */
function missedWrites(state: AppState, decidedAt: number, lockBeganAt: number, graceSeconds: number) {
  return state.commits.filter((c) => c.at >= lockBeganAt && c.at - decidedAt > graceSeconds * 1000);
}

/**
 * A write the handler holds (slow preparation) while the clock passes the grace and a migration's write
 * lock begins; then the handler is let go. What it answered, and the writes that landed under the lock.
 */
async function lateWrite(framework: Framework, careless: boolean, holdMs: number) {
  const clock = new ManualClock(Date.UTC(2026, 5, 1));
  const routing = new TestRoutingClient({ clock: clock.now });
  let entered!: () => void;
  let release!: () => void;
  const inHandler = new Promise<void>((resolve) => (entered = resolve));
  const released = new Promise<void>((resolve) => (release = resolve));
  const app = await startApp(framework, {
    routing,
    clock: clock.now,
    careless,
    gate: () => (entered(), released),
  });
  try {
    // decided on a started lock's view (hard-delete allows writes): every request re-fetches it, so no
    // cache life covers the write and the grace alone bounds it, the case the check exists for
    routing.set(id, states.hardDelete({ from, to }));
    const answer = call(`${app.url}/items/${id}`, 'POST');
    await inHandler;
    const decidedAt = clock.now();
    clock.advance(holdMs);
    const lockBeganAt = clock.now();
    routing.set(id, states.writeLock({ from, to }));
    release();
    const grace = routing.inFlightGraceSeconds;
    return { answer: await answer, missed: missedWrites(app, decidedAt, lockBeganAt, grace), grace };
  } finally {
    await app.close();
  }
}

describe.each(frameworks)('through %s', (framework) => {
  test('a write whose handler outlasts the grace is not committed: 503 GraceExpired', async () => {
    const { answer, missed, grace } = await lateWrite(framework, false, 5_001);
    expect(grace).toBe(5);
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(answer.body).toMatchObject({ code: 'GraceExpired', status: 503, instance: `/items/${id}` });
    expect(missed).toEqual([]);
  });

  test('within the grace the write commits (the lock it meets was not in force when it was decided)', async () => {
    const { answer, missed } = await lateWrite(framework, false, 4_900); // the view is 50 ms older: the server's read lead
    expect(answer.status).toBe(201);
    expect(missed).toEqual([]);
  });

  test('negative control: a handler that skips commitOk commits a write after the write lock began, caught', async () => {
    const { answer, missed } = await lateWrite(framework, true, 5_001);
    expect(answer.status).toBe(201);
    expect(missed).toHaveLength(1);
  });

  test('a tombstone is a write too: decided longer ago than the grace, it is not recorded', async () => {
    const clock = new ManualClock(Date.UTC(2026, 5, 1));
    const routing = new TestRoutingClient({ clock: clock.now });
    const decideFor = routing.decideFor.bind(routing);
    routing.decideFor = async (...args) => {
      const decided = await decideFor(...args);
      clock.advance(5_100); // a slow resolve: the grace is spent before the tombstone's turn
      return decided;
    };
    const app = await startApp(framework, { routing, clock: clock.now });
    try {
      routing.set(id, states.hardDelete({ from, to }));
      const answer = await call(`${app.url}/items/${id}`, 'DELETE');
      expect(answer.status).toBe(503);
      expect(answer.body).toMatchObject({ code: 'GraceExpired' });
      expect(app.tombstones).toEqual([]);
    } finally {
      await app.close();
    }
  });
});
