import type { HttpCall } from '../../shared/migration/types';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { FailoverStore } from '../../testkit/failoverStore';
import { virtualRunner } from './migrationHarness';

export const SOURCE = { region: 'westeurope', account: 'chatweu01' };
export const TARGET = { region: 'eastus', account: 'chatuse01' };

/**
 * An in-process migration (dev timing, one participant) over a store whose write region fails over
 * `failoverAfterMs` after the swap it acknowledged, dropping it (testkit/failoverStore.ts). The participant
 * copies at once and does not implement verify; every request it got is in `posts`. `env` sets the
 * replication bound and anything else the case needs.
 */
export function failoverMigration(options: { failoverAfterMs: number; env: Record<string, string> }) {
  const clock = new ManualClock(Date.UTC(2026, 4, 1));
  const store = new FailoverStore(new SqliteStore(':memory:'), clock.now, options.failoverAfterMs);
  const posts: { step: string; at: number; body: HttpCall['body'] }[] = [];
  const h = virtualRunner({
    clock,
    store,
    env: {
      ROUTELOCK_PROFILE: 'dev',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'p', url: 'https://p.test/migrate' }]),
      ROUTELOCK_SAFETY_BUFFER_SECONDS: '2',
      ...options.env,
    },
    http: (call) => {
      posts.push({ step: call.body.step, at: clock.now(), body: call.body });
      // verify (an optional step) not implemented: the copies are all these cases need
      return Promise.resolve(
        call.body.step === 'verify' ? { status: 404, body: null } : { status: 200, body: null },
      );
    },
  });
  return { clock, store, posts, h };
}
