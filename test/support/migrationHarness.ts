import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { ManualClock } from '../../testkit/clock';
import { type Config, parseConfig } from '../../shared/config';
import { createActivities } from '../../shared/migration/activities';
import { InProcessRunner } from '../../shared/migration/inProcess';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { VirtualScheduler } from '../../testkit/virtualScheduler';
import type { HttpCall, HttpResult } from '../../shared/migration/types';
import type { ParticipantHttpOptions } from '../../shared/migration/participantHttp';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import type { LocationStore } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import type { TelemetrySink } from '../../shared/migration/telemetry/sink';

/**
 * A stubbed participant that implements only the copies: version 4's `verify` (an optional step,
 * docs/design.md §6.5) answers 404, "not verified", and never reaches the stub (its call log stays the
 * copies').
 */
export const copiesOnly =
  (stub: (call: HttpCall) => Promise<HttpResult>) =>
  (call: HttpCall): Promise<HttpResult> =>
    call.body.step === 'verify' ? Promise.resolve({ status: 404, body: null }) : stub(call);

/** The in-process runner on virtual time over a real store: migrations of hours finish in milliseconds. */
export function virtualRunner(
  options: {
    env?: Record<string, string>;
    store?: LocationStore;
    statePath?: string;
    /** `null`: no stub, participants are called over HTTP (the real callParticipant activity). */
    http?: ((call: HttpCall) => Promise<HttpResult>) | null;
    participantHttp?: ParticipantHttpOptions;
    config?: Config;
    keyring?: TokenKeyring;
    clock?: ManualClock;
    /** Where the runner and the activities send telemetry (MigrationEnded). */
    sink?: TelemetrySink;
  } = {},
) {
  const config = options.config ?? parseConfig(options.env ?? {});
  const clock = options.clock ?? new ManualClock();
  const scheduler = new VirtualScheduler(clock);
  const store = options.store ?? new SqliteStore(':memory:');
  const router = new Router({ store, timing: config.timing, clock: clock.now });
  const state = new SqliteMigrationState(options.statePath ?? ':memory:');
  const keyring = options.keyring ?? TokenKeyring.ephemeral();
  const activities = createActivities(router, config.timing, {
    keyring,
    records: state,
    participantHttp: options.participantHttp,
    sink: options.sink,
  });
  let n = 0;
  const runner = new InProcessRunner({
    activities,
    keyring,
    state,
    scheduler,
    settings: migrationSettings(config),
    newId: () => `m-${++n}`,
    ...(options.sink ? { sink: options.sink } : {}),
    // Tests never reach a network: a participant without a stub answers 599 at once.
    ...(options.http === null
      ? {}
      : { http: options.http ?? (async () => ({ status: 599, body: 'no participant stub in this test' })) }),
  });
  const settle = () => scheduler.runWhile(() => runner.activeCount > 0);
  return { config, clock, scheduler, store, router, state, keyring, activities, runner, settle };
}
