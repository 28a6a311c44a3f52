import { MAX_ORCHESTRATION_ACTIONS } from '../../shared/migration/workflow/copy';
import { type FailedAttempt, afterFailedAttempt } from '../../shared/migration/workflow/attempts';

/**
 * What follows a failed attempt (docs/design.md §6.3): the gate between attempts first for a swap whose
 * answer was lost, another attempt, or the end, and the end's note when only the history had no room.
 * One pure rule; the workflow (workflow/attempts.ts) carries out what it answers.
 */

const ROOM = MAX_ORCHESTRATION_ACTIONS;
const base: FailedAttempt = {
  code: 'ParticipantFailed',
  attempt: 1,
  last: 3,
  actions: 1_000,
  attemptActionsBound: 5_000,
  gated: false,
};
const NO_ROOM = ' (no room in the history for another attempt)';

test.each<[string, Partial<FailedAttempt>, ReturnType<typeof afterFailedAttempt>]>([
  // a transient failure with attempts and history room left: another attempt
  ['transient, attempts left, room', {}, { kind: 'retry' }],
  ['transient, the last attempt', { attempt: 3 }, { kind: 'final', note: '' }],
  ['transient, past the last attempt', { attempt: 4 }, { kind: 'final', note: '' }],
  ['final code, attempts left', { code: 'Locked' }, { kind: 'final', note: '' }],
  ['no code, attempts left', { code: undefined }, { kind: 'final', note: '' }],
  ['unknown code, attempts left', { code: 'SomethingNew' }, { kind: 'final', note: '' }],
  // the history room: one more attempt at its worst must fit under the extension's cap
  ['room exactly for one more', { actions: ROOM - 5_000 }, { kind: 'retry' }],
  ['one action short of room', { actions: ROOM - 4_999 }, { kind: 'final', note: NO_ROOM }],
  ['no room, and the last attempt anyway', { actions: ROOM, attempt: 3 }, { kind: 'final', note: '' }],
  ['no room, and a final code anyway', { actions: ROOM, code: 'Locked' }, { kind: 'final', note: '' }],
  // a swap whose answer was lost: the gate first, whatever is left
  ['lost swap, attempts left', { code: 'SwapUnknown' }, { kind: 'gate' }],
  ['lost swap, the last attempt', { code: 'SwapUnknown', attempt: 3 }, { kind: 'gate' }],
  ['lost swap, no room', { code: 'SwapUnknown', actions: ROOM }, { kind: 'gate' }],
  // ... and once the gate found the route free, the same rule as any transient failure
  ['lost swap gated, attempts left', { code: 'SwapUnknown', gated: true }, { kind: 'retry' }],
  [
    'lost swap gated, the last attempt',
    { code: 'SwapUnknown', gated: true, attempt: 3 },
    { kind: 'final', note: '' },
  ],
  [
    'lost swap gated, no room',
    { code: 'SwapUnknown', gated: true, actions: ROOM },
    { kind: 'final', note: NO_ROOM },
  ],
  // the gate is only for a lost swap
  ['another code, gated', { code: 'SwapLost', gated: true }, { kind: 'retry' }],
  ['a dropped swap is not gated first', { code: 'SwapLost' }, { kind: 'retry' }],
])('%s', (_label, change, expected) => {
  expect(afterFailedAttempt({ ...base, ...change })).toEqual(expected);
});
