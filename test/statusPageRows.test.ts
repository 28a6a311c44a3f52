import type { MigrationStatus } from '../shared/migration/types';
import { runStatusPageScript } from './support/statusPageScript';

/**
 * What the status page's migrations table says of a migration that ended badly (docs/design.md §6.12): where
 * it stopped and why, from `MigrationStatus.stopped` (the failures branch builds it) or, before that, from
 * its error, timeline and attempts. The page's own script, run against stubbed reads.
 */

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
const base = {
  migrationId: 'm-1',
  resourceId: 'r-1',
  target: { region: 'eastus' },
  timeline: { prelockAt: at(0), hardDeleteAt: at(4), writeAt: at(4), swappedAt: null },
} as const;

async function row(m: Partial<MigrationStatus>): Promise<{ why: string; html: string }> {
  const element = await runStatusPageScript({
    '/api/ops/view/routes': { items: [] },
    '/api/ops/view/migrations': { items: [{ ...base, ...m }] },
  });
  const html = element('migrations').innerHTML;
  const why = /<td class="why">([^<]*)<\/td>/.exec(html)?.[1] ?? '';
  return { why: why.replace(/&#39;/g, "'").replace(/&quot;/g, '"'), html };
}

test.each<[string, Partial<MigrationStatus> & Record<string, unknown>, string]>([
  [
    'stopped, as the contract gives it',
    {
      status: 'Failed',
      phase: 'released',
      stopped: { phase: 'write', code: 'ParticipantFailed', reason: 'delta copy timed out', at: at(9) },
    },
    'failed in write lock: ParticipantFailed — delta copy timed out',
  ],
  [
    'stopped, with a reason that repeats its step and code: said once',
    {
      status: 'Failed',
      phase: 'released',
      stopped: {
        phase: 'write',
        code: 'ParticipantFailed',
        reason: 'deltaCopy: ParticipantFailed: participant p answered 422; lock released',
        at: at(9),
      },
    },
    'failed in write lock: ParticipantFailed — participant p answered 422; lock released',
  ],
  [
    'a conflict, stopped in the pre-lock',
    {
      status: 'Conflict',
      phase: 'released',
      stopped: { phase: 'prelock', code: 'LockConflict', reason: 'another lock holds it', at: at(1) },
    },
    'conflict in pre-lock: LockConflict — another lock holds it',
  ],
  [
    'before stopped: the error (its step and code) and the phase the timeline reached',
    {
      status: 'Failed',
      phase: 'released',
      error: 'deltaCopy: ParticipantFailed: participant p answered 422 to deltaCopy; lock released',
      attempts: [{ attempt: 1, startedAt: at(0), endedAt: at(5), outcome: 'Failed' }],
    },
    'failed in write lock: ParticipantFailed — participant p answered 422 to deltaCopy; lock released',
  ],
  [
    'before stopped: an error without a code, on a second attempt',
    {
      status: 'Failed',
      phase: 'converging',
      error: 'the orchestration failed',
      attempts: [
        { attempt: 1, startedAt: at(0), endedAt: at(2), outcome: 'Failed' },
        { attempt: 2, startedAt: at(3), endedAt: at(5), outcome: 'Failed' },
      ],
    },
    'failed in convergence wait: the orchestration failed (attempt 2)',
  ],
  [
    'cancelled',
    {
      status: 'Cancelled',
      phase: 'released',
      timeline: { ...base.timeline, writeAt: null, hardDeleteAt: null },
    },
    'cancelled in pre-lock',
  ],
])('%s', async (_case, migration, expected) => {
  const { why, html } = await row(migration);
  expect(why).toBe(expected);
  // its bar ends in the stop mark, titled with the same words
  expect(html).toContain('<span class="stop" title="');
});

test('a completed or running migration says nothing of stopping and has no stop mark', async () => {
  for (const status of ['Completed', 'Running'] as const) {
    const { why, html } = await row({
      status,
      phase: 'swapped',
      timeline: { ...base.timeline, swappedAt: at(5) },
    });
    expect(why).toBe('');
    expect(html).not.toContain('class="stop"');
  }
});

test('negative control: the reason is escaped, never markup', async () => {
  const { html } = await row({
    status: 'Failed',
    phase: 'released',
    error: '<img src=x onerror=alert(1)>',
  });
  expect(html).not.toContain('<img');
  expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
});

test('a slower, older refresh never overwrites a newer one; the timer skips a tick while one is out', async () => {
  const held: { url: string; answer: (body: unknown) => void }[] = [];
  const reads: string[] = [];
  let tick: (() => void) | undefined;
  let hashchange: (() => void) | undefined;
  const page = (id: string) => ({
    items: [{ ...base, migrationId: id, status: 'Completed', phase: 'swapped' }],
  });
  const element = await runStatusPageScript({}, '', {
    noWait: true,
    onInterval: (fn) => (tick = fn),
    onWindowEvent: (name, fn) => {
      if (name === 'hashchange') hashchange = fn;
    },
    fetch: (url) => {
      reads.push(url);
      return new Promise((resolve) =>
        held.push({
          url,
          answer: (body) => resolve({ ok: true, status: 200, json: () => Promise.resolve(body) }),
        }),
      );
    },
  });
  const settle = async () => {
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  const answerAll = (migrations: unknown) => {
    for (const read of held.splice(0))
      read.answer(read.url.includes('/migrations') ? migrations : { items: [] });
  };
  const first = reads.length;
  expect(first).toBeGreaterThan(0); // the first refresh's reads, all held
  const firstReads = held.splice(0);
  tick!();
  expect(reads.length).toBe(first); // a refresh is out: the tick asked nothing
  hashchange!(); // the operator changes a filter: a new refresh supersedes the first
  await settle();
  answerAll(page('m-newer'));
  await settle();
  answerAll(page('m-newer')); // the chart sample
  await settle();
  expect(element('migrations').innerHTML).toContain('m-newer');
  // the first refresh's answers arrive last, and are dropped
  for (const read of firstReads)
    read.answer(read.url.includes('/migrations') ? page('m-older') : { items: [] });
  await settle();
  expect(element('migrations').innerHTML).toContain('m-newer');
  expect(element('migrations').innerHTML).not.toContain('m-older');
});
