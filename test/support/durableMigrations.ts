import { createHash } from 'node:crypto';
import { migrationOrchestrator } from '../../functions/migrationOrchestrator';
import { parseConfig } from '../../shared/config';
import type { LocationDocument, StoredDocument } from '../../shared/core/lock/document';
import type { Activities } from '../../shared/migration/activities';
import type { MigrationInput, VerifyAnswer } from '../../shared/migration/types';
import { type LockSeed, TokenKeyring } from '../../shared/core/security/tokenKeys';
import type { LocationStore, PriorityOption, ReadOptions } from '../../shared/core/store/ports/locations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import {
  DurableReplay,
  type HttpReply,
  type HttpRequestSeen,
  type ReplayOptions,
} from '../../testkit/durableReplay';
import { FaultyStore } from '../../testkit/faultyStore';
import { ForwardingStore } from '../../testkit/forwardingStore';
import { migrationFixture } from '../../testkit/migrationFixture';

/**
 * One migration on the Durable orchestrator through the faithful replay harness
 * (testkit/durableReplay.ts): a real store and record, the real activities, participants played by
 * `participantJobs`. Shared by the harness scenarios and the versioning fixtures.
 */

export const SOURCE = { region: 'westeurope', account: 'chatweu01' };
export const TARGET = { region: 'eastus', account: 'chatuse01' };
export const START = Date.UTC(2026, 2, 1);

/**
 * A key ring and seed for recorded histories only: the key is the SHA-256 of a public sentence, so
 * the fixtures (which hold the seed) hold no secret and replay the same credentials anywhere.
 */
export const FIXTURE_KEYRING = new TokenKeyring({
  current: 'fixture',
  keys: {
    fixture: createHash('sha256')
      .update('routelock test fixture key: public, not a secret')
      .digest('base64url'),
  },
});
export const FIXTURE_SEED: LockSeed = {
  keyId: 'fixture',
  nonce: createHash('sha256').update('routelock test fixture nonce').digest('base64url'),
};

/** ETags numbered in write order (e1, e2 …) instead of random: a recorded history stays the same. */
export class NumberedEtagStore extends ForwardingStore {
  private readonly outer = new Map<string, string>();
  private readonly innerOf = new Map<string, string>();

  private number(stored: StoredDocument): StoredDocument {
    let etag = this.outer.get(stored.etag);
    if (etag === undefined) {
      etag = `e${this.outer.size + 1}`;
      this.outer.set(stored.etag, etag);
      this.innerOf.set(etag, stored.etag);
    }
    return { ...stored, etag };
  }
  override async read(id: string, options: ReadOptions): Promise<StoredDocument> {
    return this.number(await super.read(id, options));
  }
  override async create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    return this.number(await super.create(doc, options));
  }
  override async replace(
    doc: LocationDocument,
    ifMatch: string,
    options?: PriorityOption,
  ): Promise<StoredDocument> {
    return this.number(await super.replace(doc, this.innerOf.get(ifMatch) ?? ifMatch, options));
  }
  override delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    return super.delete(id, this.innerOf.get(ifMatch) ?? ifMatch, options);
  }
}

/** Which migration input the scenarios start, and how its participants are connected. */
export interface InputVersion {
  label: string;
  toInput: (input: MigrationInput) => MigrationInput;
  /** How its participants answer a job that takes a while: 200 at the end, or 202 + polling. */
  answers: 'sync' | 'async';
  /** Route the participant calls to the scripted participants (replaces `activities.callParticipant`). */
  connect?: (
    activities: Activities,
    http: (request: HttpRequestSeen) => HttpReply,
    now: () => number,
  ) => void;
}

/**
 * Inputs of workflow version 5, their participants called by the `callParticipant`
 * activity, one request each, polled by the workflow on durable timers. The activity's own HTTP
 * (timeout, Location, token) is tested against a real server in participantProtocol.test.ts; here it
 * answers from the scripted participants at the harness's virtual time, a reply slower than the
 * request timeout counting as no answer.
 */
export const V5: InputVersion = {
  label: 'v5 (workflowVersion 5)',
  toInput: (i) => ({ ...i, workflowVersion: 5 }),
  answers: 'async',
  connect: (activities, http, now) => {
    activities.callParticipant = async (call) => {
      const reply = http({
        method: call.method,
        url: call.method === 'POST' ? call.participantUrl : call.url,
        body: call.method === 'POST' ? call.body : undefined,
        headers: {},
        now: now(),
      });
      const noAnswer =
        reply.transportError !== undefined || (reply.durationMs ?? 0) > call.timeoutSeconds * 1000;
      const location = reply.headers?.Location;
      const retryAfter = reply.headers?.['Retry-After'];
      return {
        ok: true,
        value: {
          status: noAnswer ? 0 : reply.statusCode,
          body: reply.content === undefined ? null : jsonOrText(reply.content),
          ...(location ? { location } : {}),
          ...(retryAfter ? { retryAfterSeconds: Number(retryAfter) } : {}),
        },
      };
    };
  },
};

/**
 * Inputs of workflow version 6, which has `timerFiredIsDue` (workflow/capabilities.ts): the participants
 * connected as for version 5; a copy loop woken by its timer takes the instant it slept until as reached.
 */
export const V6: InputVersion = {
  ...V5,
  label: 'v6 (workflowVersion 6)',
  toInput: (i) => ({ ...i, workflowVersion: 6 }),
};

/**
 * Inputs of workflow version 7 (`announcedEscalations`): the participants connected as for version 6.
 * Its scenarios start with ROUTELOCK_ANNOUNCED_LOCKS on (durableHistories.ts), so the input's
 * settings carry `announcedLocks` and the path is the announced one.
 */
export const V7: InputVersion = {
  ...V5,
  label: 'v7 (workflowVersion 7)',
  toInput: (i) => ({ ...i, workflowVersion: 7 }),
};

/** A reply's body as the callParticipant activity hands it on: JSON parsed, anything else as text. */
function jsonOrText(content: string): unknown {
  try {
    return JSON.parse(content) as unknown;
  } catch {
    return content;
  }
}

export interface Job {
  host: string;
  step: string;
  attempt: number;
}

/**
 * Participant services: a POST starts the job (the same job POSTed again is the same job), and the
 * answer comes when it ends. `sync`: the POST answers 200 when the job ends. `async`: 202 + absolute
 * Location at once, polls answer 202 until the job ends, then 200. They implement only the copies:
 * `verify` (optional) answers 404 and is not in `calls`.
 */
export function participantJobs(options: {
  durationMs: (job: Job) => number;
  answers: 'sync' | 'async';
  status?: (job: Job) => number;
  /** Given: `verify` answers 200 with it at once (an honest participant's match), and is in `calls`. */
  verify?: VerifyAnswer;
}) {
  const ends = new Map<string, number>();
  const calls: { method: string; job: string; at: number }[] = [];
  const http = (request: HttpRequestSeen): HttpReply => {
    if (request.method === 'POST' && (request.body as { step?: string } | undefined)?.step === 'verify') {
      if (options.verify === undefined) return { statusCode: 404 };
      calls.push({ method: 'POST', job: `${new URL(request.url).host}:verify`, at: request.now });
      return { statusCode: 200, content: JSON.stringify(options.verify) };
    }
    const url = new URL(request.url);
    const key =
      request.method === 'GET'
        ? decodeURIComponent(url.pathname.replace(/^\/jobs\//, ''))
        : (() => {
            const body = request.body as { step: string; attempt: number };
            return `${url.host}:${body.step}:${body.attempt}`;
          })();
    calls.push({ method: request.method, job: key, at: request.now });
    const [host = '', step = '', attempt = '1'] = key.split(':');
    const job = { host, step, attempt: Number(attempt) };
    if (!ends.has(key)) ends.set(key, request.now + options.durationMs(job));
    const left = Math.max(0, (ends.get(key) as number) - request.now);
    const status = options.status?.(job) ?? 200;
    if (options.answers === 'sync') return { statusCode: status, durationMs: left };
    if (left === 0) return { statusCode: status };
    return {
      statusCode: 202,
      headers: { Location: `https://${host}/jobs/${encodeURIComponent(key)}`, 'Retry-After': '10' },
    };
  };
  return { http, calls };
}

export async function durableMigration(
  options: {
    env?: Record<string, string>;
    participants?: { name: string; url: string }[];
    version?: InputVersion;
    /** Fixed key ring, seed and ETags: for recorded histories. */
    reproducible?: boolean;
  } = {},
) {
  const config = parseConfig({
    ...(options.env ?? {}),
    ROUTELOCK_PARTICIPANTS: JSON.stringify(options.participants ?? []),
  });
  const inner: LocationStore = new SqliteStore(':memory:');
  const store = new FaultyStore(options.reproducible ? new NumberedEtagStore(inner) : inner);
  const fixture = await migrationFixture({
    config,
    start: START,
    source: SOURCE,
    target: TARGET,
    store,
    ...(options.reproducible ? { keyring: FIXTURE_KEYRING, seed: FIXTURE_SEED } : {}),
  });
  const version = options.version ?? V5;
  const input = version.toInput(fixture.input);
  /** Activities the store refuses: by name, `times` calls each (counting every retry attempt). */
  const outage = new Map<string, number>();
  const make = (replay: Partial<ReplayOptions> = {}) => {
    const harness: DurableReplay = new DurableReplay({
      orchestrator: migrationOrchestrator,
      name: 'migrationOrchestrator',
      instanceId: input.instanceId,
      input,
      start: START,
      activity: async (fn, activityInput) => {
        try {
          return await fixture.runActivity(fn, activityInput, harness.now, (name) => {
            const left = outage.get(name) ?? 0;
            if (left <= 0) return;
            outage.set(name, left - 1);
            store.down = true;
          });
        } finally {
          store.down = false;
        }
      },
      ...replay,
    });
    if (version.connect && replay.http) version.connect(fixture.activities, replay.http, () => harness.now);
    return harness;
  };
  return { ...fixture, config, store, input, make, outage };
}
