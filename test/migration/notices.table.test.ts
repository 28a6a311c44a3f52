import { endStepOf, noticeVerdict } from '../../shared/migration/workflow/notify';

/** What an answer to an end notice means (workflow/notify.ts): the one rule, every row. */
test.each([
  [200, undefined, 'delivered'],
  [202, undefined, 'delivered'], // accepted: a notice is never polled
  [204, undefined, 'delivered'],
  [404, undefined, 'notImplemented'], // an optional step
  [503, undefined, 'transient'],
  [429, 7, 'transient'],
  [408, undefined, 'transient'],
  [0, undefined, 'transient'], // no answer
  [400, undefined, 'undelivered'],
  [409, undefined, 'undelivered'],
  [201, undefined, 'undelivered'],
  [302, undefined, 'undelivered'],
])('%s (Retry-After %s): %s', (status, retryAfterSeconds, kind) => {
  const verdict = noticeVerdict({
    status,
    body: null,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
  });
  expect(verdict.kind).toBe(kind);
  if (retryAfterSeconds !== undefined) expect(verdict).toMatchObject({ retryAfterSeconds });
});

test.each([
  ['Completed', 'completed'],
  ['Failed', 'failed'],
  ['Cancelled', 'cancelled'],
  ['Conflict', null],
  ['NoOp', null],
  ['Running', null],
] as const)('%s → %s', (state, step) => expect(endStepOf(state)).toBe(step));
