import type { TimingConfig } from '../config';
import { isRouteLockError } from '../errors';
import { swap as swapRule } from '../lock/rules';
import { routeView } from '../lock/view';
import type { Router } from '../router';
import type { MigrationRecords } from './records';
import type { ActivityInputs, ActivityName, ActivityOutputs, ActivityResult } from './types';

/**
 * The workflow's activities, over the routing library. Both runners call these: the Durable activity
 * functions and the in-process runner. A lock error is returned as a value; a store outage is thrown,
 * so that only transient failures meet a retry policy.
 */
export type Activities = {
  [K in ActivityName]: (input: ActivityInputs[K]) => Promise<ActivityResult<ActivityOutputs[K]>>;
};

export function createActivities(
  router: Router,
  timing: TimingConfig,
  records?: MigrationRecords,
): Activities {
  const run = async <T>(work: () => Promise<T>): Promise<ActivityResult<T>> => {
    try {
      return { ok: true, value: await work() };
    } catch (error) {
      if (isRouteLockError(error) && error.code !== 'StoreUnavailable') {
        return {
          ok: false,
          code: error.code,
          message: error.message,
          ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
        };
      }
      throw error;
    }
  };
  const opts = (ifMatch: string | undefined) => ({ ifMatch });
  return {
    prelock: ({ resourceId, ...req }) => run(() => router.prelock(resourceId, req)),
    escalate: ({ resourceId, ifMatch, ...req }) => run(() => router.escalate(resourceId, req, opts(ifMatch))),
    renew: ({ resourceId, ifMatch, ...req }) => run(() => router.renew(resourceId, req, opts(ifMatch))),
    swap: ({ resourceId, ifMatch, token }) =>
      run(async () => {
        const stored = await router.apply(
          resourceId,
          (doc, now) => swapRule(doc, { token }, now),
          opts(ifMatch),
        );
        return {
          view: routeView(stored, router.now(), timing),
          swappedAt: stored.doc.lastMigration?.swappedAt ?? null,
        };
      }),
    release: ({ resourceId, ifMatch, ...req }) => run(() => router.release(resourceId, req, opts(ifMatch))),
    readRoute: ({ resourceId, from }) =>
      run(async () =>
        from === 'readPath'
          ? (await router.view(resourceId)).view
          : routeView(await router.readAuthoritative(resourceId), router.now(), timing),
      ),
    recordOutcome: ({ status }) =>
      run(async () => {
        await records?.saveStatus(status.migrationId, status, true);
        return null;
      }),
  };
}
