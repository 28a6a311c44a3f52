import { poll } from '../support/poll';

/**
 * A participant-side conformance suite, written from the contract (docs/design.md §6.5, §6.11), that
 * drives any participant over HTTP as routelock does and checks what it must keep: job identity, the
 * re-POST of a job, a failed job started again, polling (202 + an absolute Location and Retry-After, 200
 * only when done), `Prefer: wait`, supersession (409, and the older copy never landing), and the
 * notices' clean-up (not before `cleanUpSourceAfter`, never live data). Each check throws a
 * `Nonconformance` naming the rule on the first violation, so a test can also show a check failing on a
 * participant built to break its rule (the negative control).
 *
 * A participant under test is a `Subject`: its URL and a few seams into its store, which is all the
 * suite needs to see where the data went.
 */

export interface Subject {
  /** The participant's POST URL (`…/migrate`). */
  url: string;
  /** Put a few items of `resourceId` at the source region, so a copy has something to carry. */
  seed(resourceId: string): void;
  /** What a region holds of the resource, as comparable text ('' when nothing). */
  held(resourceId: string, region: 'source' | 'target'): string;
  /** A user's edit at the target (after a swap), which a late older copy would overwrite. */
  editAtTarget(resourceId: string): void;
  /** The next copy fails (the job fails; POSTed again it must run again). */
  failNextCopy(): void;
  /** How long each copy takes, by its stepAttempt (ms). */
  copyDelay(delay: (stepAttempt: number) => number): void;
  /** Where the route of `resourceId` is now, as the participant's routing would resolve it (null: none). */
  routeAt(resourceId: string, region: 'source' | 'target' | null): void;
}

export class Nonconformance extends Error {
  override readonly name = 'Nonconformance';
  constructor(
    readonly rule: string,
    message: string,
  ) {
    super(`${rule}: ${message}`);
  }
}

export const REGIONS = { source: 'westeurope', target: 'eastus' } as const;
const LOCK_AT = '2026-12-01T10:00:00.000Z';

/** A job body exactly as routelock sends it. */
export function jobBody(resourceId: string, over: Record<string, unknown> = {}) {
  const step = (over.step as string | undefined) ?? 'bulkCopy';
  const stepAttempt = (over.stepAttempt as number | undefined) ?? 1;
  return {
    migrationId: 'm-1',
    resourceId,
    from: { region: REGIONS.source },
    to: { region: REGIONS.target },
    step,
    migrationAttempt: 1,
    stepAttempt,
    attempt: stepAttempt,
    sequence: step === 'bulkCopy' ? 1 : 1 + stepAttempt,
    lockAcquiredAt: LOCK_AT,
    ...over,
  };
}

interface Answer {
  status: number;
  location: string | null;
  retryAfter: string | null;
  body: unknown;
}

async function answerOf(res: Response): Promise<Answer> {
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // kept as text
  }
  return {
    status: res.status,
    location: res.headers.get('location'),
    retryAfter: res.headers.get('retry-after'),
    body,
  };
}

const post = async (s: Subject, body: unknown, prefer?: string) =>
  answerOf(
    await fetch(s.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(prefer ? { prefer } : {}) },
      body: JSON.stringify(body),
    }),
  );
const get = async (location: string) => answerOf(await fetch(location));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function expectRule(rule: string, ok: boolean, message: string): void {
  if (!ok) throw new Nonconformance(rule, message);
}

/** POST a job and poll its Location until it stops answering 202; the last answer. */
async function settle(s: Subject, first: Answer, rule: string): Promise<Answer> {
  if (first.status !== 202) return first;
  expectRule(rule, first.location !== null, '202 without a Location');
  return poll(
    () => get(first.location as string),
    (a) => a.status !== 202,
    10_000,
  );
}

async function jobIdentity(s: Subject): Promise<void> {
  const rule = 'job identity';
  s.seed('conf-id');
  s.copyDelay(() => 100);
  const answers = await Promise.all([1, 2, 3].map(() => post(s, jobBody('conf-id'))));
  expectRule(
    rule,
    answers.every((a) => a.status === 202),
    `a new job answered ${answers.map((a) => a.status).join(', ')}`,
  );
  expectRule(
    rule,
    new Set(answers.map((a) => a.location)).size === 1,
    'a repeated POST of one job got another Location',
  );
  const done = await settle(s, answers[0] as Answer, rule);
  expectRule(rule, done.status === 200, `the job ended ${done.status}`);
  expectRule(
    rule,
    (await post(s, jobBody('conf-id'))).status === 200,
    'the job, done, POSTed again is not 200',
  );
  const delta = await post(s, jobBody('conf-id', { step: 'deltaCopy' }));
  expectRule(rule, delta.location !== answers[0]?.location, 'another step answered with the same job');
  await settle(s, delta, rule);
}

async function polling(s: Subject): Promise<void> {
  const rule = 'polling';
  s.seed('conf-poll');
  s.copyDelay(() => 300);
  const first = await post(s, jobBody('conf-poll'));
  expectRule(rule, first.status === 202, `the POST of a 300 ms copy answered ${first.status}, not 202`);
  let location: URL | undefined;
  try {
    location = new URL(first.location ?? '');
  } catch {
    throw new Nonconformance(rule, `the Location ${first.location} is not absolute`);
  }
  expectRule(
    rule,
    location.origin === new URL(s.url).origin,
    `the Location is on another origin (${location.origin})`,
  );
  expectRule(
    rule,
    /^\d+$/.test(first.retryAfter ?? ''),
    `Retry-After ${first.retryAfter} is not whole seconds`,
  );
  expectRule(rule, s.held('conf-poll', 'target') === '', 'the target holds data before the copy is done');
  const running = await get(location.href);
  expectRule(rule, running.status === 202, `a poll of a running job answered ${running.status}`);
  const done = await settle(s, first, rule);
  expectRule(rule, done.status === 200, `the job ended ${done.status}`);
  expectRule(
    rule,
    s.held('conf-poll', 'target') === s.held('conf-poll', 'source'),
    'answered 200 before the data was at the target',
  );
  const gone = await get(new URL('conf-unknown', location).href); // beside the job's own Location
  expectRule(rule, gone.status === 404, `a poll of an unknown job answered ${gone.status}, not 404`);
}

async function failedJobAgain(s: Subject): Promise<void> {
  const rule = 'a failed job started again';
  s.seed('conf-fail');
  s.copyDelay(() => 20);
  s.failNextCopy();
  const failed = await settle(s, await post(s, jobBody('conf-fail')), rule);
  expectRule(
    rule,
    failed.status >= 500,
    `a failed copy answered ${failed.status}: only 200 is done, 5xx is retried`,
  );
  expectRule(rule, s.held('conf-fail', 'target') === '', 'a failed copy left data at the target');
  const again = await settle(s, await post(s, jobBody('conf-fail')), rule);
  expectRule(rule, again.status === 200, `the failed job, POSTed again, ended ${again.status}`);
  expectRule(rule, s.held('conf-fail', 'target') === s.held('conf-fail', 'source'), 'the rerun did not copy');
}

async function preferWait(s: Subject): Promise<void> {
  const rule = 'Prefer: wait';
  s.seed('conf-wait');
  s.copyDelay(() => 100);
  const startedAt = Date.now();
  const answer = await post(s, jobBody('conf-wait'), 'wait=2');
  expectRule(rule, answer.status === 200, `a 100 ms copy with wait=2 answered ${answer.status}, not 200`);
  expectRule(rule, Date.now() - startedAt < 1900, 'the answer waited past the end of the job');
  expectRule(
    rule,
    s.held('conf-wait', 'target') === s.held('conf-wait', 'source'),
    'answered 200 before the copy',
  );
}

async function supersede(s: Subject): Promise<void> {
  const rule = 'supersede';
  s.seed('conf-sup');
  // the older delta attempt is slow, the newer quick: the older would finish long after the newer
  s.copyDelay((stepAttempt) => (stepAttempt === 1 ? 400 : 50));
  const older = await post(s, jobBody('conf-sup', { step: 'deltaCopy', stepAttempt: 1 }));
  const newer = await post(s, jobBody('conf-sup', { step: 'deltaCopy', stepAttempt: 2 }));
  const done = await settle(s, newer, rule);
  expectRule(rule, done.status === 200, `the newer job ended ${done.status}`);
  s.editAtTarget('conf-sup'); // the swap happened; a user writes at the target
  const edited = s.held('conf-sup', 'target');
  await sleep(550); // past the time the older copy would land
  expectRule(
    rule,
    s.held('conf-sup', 'target') === edited,
    'the superseded older copy landed over the live target',
  );
  const polled = await get(older.location as string);
  expectRule(rule, polled.status === 409, `the superseded job's poll answered ${polled.status}, not 409`);
  const again = await post(s, jobBody('conf-sup', { step: 'deltaCopy', stepAttempt: 1 }));
  expectRule(rule, again.status === 409, `a POST of the older job answered ${again.status}, not 409`);
}

async function notices(s: Subject): Promise<void> {
  const rule = 'notices';
  for (const id of ['conf-done', 'conf-live']) {
    s.seed(id);
    s.copyDelay(() => 10);
    await settle(s, await post(s, jobBody(id)), rule);
  }
  s.routeAt('conf-done', 'target');
  s.routeAt('conf-live', 'source');
  const after = Date.now() + 400;
  const notice = (id: string) => ({
    ...jobBody(id, { sequence: 9 }),
    step: 'completed',
    cleanUpSourceAfter: new Date(after).toISOString(),
  });
  for (const id of ['conf-done', 'conf-live']) {
    const answer = await post(s, notice(id));
    expectRule(rule, answer.status === 200, `the completed notice answered ${answer.status}`);
  }
  await sleep(200);
  expectRule(rule, s.held('conf-done', 'source') !== '', 'the source was deleted before cleanUpSourceAfter');
  await poll(
    async () => s.held('conf-done', 'source'),
    (h) => h === '',
    5000,
  ).catch(() => {
    throw new Nonconformance(rule, 'the retired source was never cleaned up');
  });
  expectRule(rule, Date.now() >= after, 'cleaned up before cleanUpSourceAfter');
  expectRule(
    rule,
    s.held('conf-live', 'source') !== '',
    'deleted the source while the route was there (live data)',
  );
}

/** The checks, by rule. */
export const conformanceChecks: Record<string, (subject: Subject) => Promise<void>> = {
  'job identity and re-POST': jobIdentity,
  polling,
  'a failed job started again': failedJobAgain,
  'Prefer: wait': preferWait,
  'supersede (409)': supersede,
  notices,
};
