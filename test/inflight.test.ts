import { SharedReads } from '../shared/core/inflight';
import { ManualClock } from '../testkit/clock';

/** SharedReads (shared/core/inflight.ts; docs/design.md §5.8): the join rule and the life of one read. */

/** A read the test settles by hand. */
function deferred<V>() {
  let resolve!: (value: V) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<V>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('the join rule: mayJoin(startedAt, now, joinBoundMs)', () => {
  test.each`
    startedAt | now     | bound   | joins    | why
    ${1000}   | ${1000} | ${0}    | ${true}  | ${'the same instant, bound 0'}
    ${1000}   | ${1001} | ${0}    | ${false} | ${'1 ms later, bound 0'}
    ${1000}   | ${1050} | ${50}   | ${true}  | ${'exactly at the bound'}
    ${1000}   | ${1051} | ${50}   | ${false} | ${'1 ms past the bound'}
    ${1000}   | ${1010} | ${50}   | ${true}  | ${'well within'}
    ${1000}   | ${990}  | ${0}    | ${true}  | ${'a read dated after now (clock stepped back): no older than the caller'}
    ${0}      | ${6000} | ${5000} | ${false} | ${'a read older than a 5 s grace'}
  `('$why: $joins', ({ startedAt, now, bound, joins }) => {
    expect(SharedReads.mayJoin(startedAt as number, now as number, bound as number)).toBe(joins);
  });

  test('a negative or non-finite bound is refused', () => {
    const clock = new ManualClock();
    expect(() => new SharedReads({ joinBoundMs: -1, clock: clock.now })).toThrow(/joinBoundMs/);
    expect(() => new SharedReads({ joinBoundMs: Number.NaN, clock: clock.now })).toThrow(/joinBoundMs/);
  });
});

describe('run(key, read)', () => {
  test('concurrent callers of one key within the bound share one read; other keys read on their own', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 50, clock: clock.now });
    const a = deferred<string>();
    const b = deferred<string>();
    const calls: string[] = [];
    const readA = () => {
      calls.push('a');
      return a.promise;
    };
    const first = reads.run('a', readA);
    clock.advance(50);
    const second = reads.run('a', readA);
    const other = reads.run('b', () => {
      calls.push('b');
      return b.promise;
    });
    expect(calls).toEqual(['a', 'b']);
    expect(reads).toMatchObject({ started: 2, joined: 1, size: 2 });
    expect(reads.startedAt('a')).toBe(1000);
    a.resolve('A1');
    b.resolve('B1');
    await expect(Promise.all([first, second, other])).resolves.toEqual(['A1', 'A1', 'B1']);
    expect(reads.size).toBe(0);
  });

  test('a read older than the bound is replaced: later callers join the new one, the old answers its own', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 50, clock: clock.now });
    const old = deferred<string>();
    const fresh = deferred<string>();
    const first = reads.run('k', () => old.promise);
    clock.advance(51);
    const second = reads.run('k', () => fresh.promise);
    clock.advance(10);
    const third = reads.run('k', () => Promise.reject(new Error('not called')));
    expect(reads).toMatchObject({ started: 2, joined: 1, size: 1 });
    expect(reads.startedAt('k')).toBe(1051);
    // the old read settles first: it must not remove the fresh one
    old.resolve('old');
    await expect(first).resolves.toBe('old');
    expect(reads.startedAt('k')).toBe(1051);
    const fourth = reads.run('k', () => Promise.reject(new Error('not called')));
    fresh.resolve('fresh');
    await expect(Promise.all([second, third, fourth])).resolves.toEqual(['fresh', 'fresh', 'fresh']);
    expect(reads.size).toBe(0);
  });

  test('a settled read is never joined: the next call reads again', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, number>({ joinBoundMs: 1000, clock: clock.now });
    let n = 0;
    const read = () => Promise.resolve((n += 1));
    await expect(reads.run('k', read)).resolves.toBe(1);
    await expect(reads.run('k', read)).resolves.toBe(2);
    expect(reads).toMatchObject({ started: 2, joined: 0 });
  });

  test('a rejection is shared by the callers who joined it, then the next call makes a fresh read', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 50, clock: clock.now });
    const failing = deferred<string>();
    const first = reads.run('k', () => failing.promise);
    const joined = reads.run('k', () => Promise.resolve('not called'));
    failing.reject(new Error('store unavailable'));
    await expect(first).rejects.toThrow('store unavailable');
    await expect(joined).rejects.toThrow('store unavailable');
    await expect(reads.run('k', () => Promise.resolve('fresh'))).resolves.toBe('fresh');
    expect(reads).toMatchObject({ started: 2, joined: 1, size: 0 });
  });

  test('a read that throws synchronously is its caller alone: nothing is left in flight', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 50, clock: clock.now });
    await expect(
      reads.run('k', () => {
        throw new Error('bad key');
      }),
    ).rejects.toThrow('bad key');
    expect(reads.size).toBe(0);
    await expect(reads.run('k', () => Promise.resolve('ok'))).resolves.toBe('ok');
  });

  test('forget(key): later callers start a fresh read; the forgotten read still answers its callers', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 50, clock: clock.now });
    const before = deferred<string>();
    const first = reads.run('k', () => before.promise);
    reads.forget('k');
    const after = reads.run('k', () => Promise.resolve('after the write'));
    before.resolve('before the write');
    await expect(Promise.all([first, after])).resolves.toEqual(['before the write', 'after the write']);
    expect(reads).toMatchObject({ started: 2, joined: 0, size: 0 });
  });

  test('bound 0 on a clock that does not move: a burst in one instant costs one read', async () => {
    const clock = new ManualClock(1000);
    const reads = new SharedReads<string, string>({ joinBoundMs: 0, clock: clock.now });
    const one = deferred<string>();
    const all = Array.from({ length: 2000 }, () => reads.run('k', () => one.promise));
    one.resolve('v');
    await Promise.all(all);
    expect(reads).toMatchObject({ started: 1, joined: 1999 });
  });
});
