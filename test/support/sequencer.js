const Sequencer = require('@jest/test-sequencer').default;

/**
 * The protocol search (test/verify.test.ts) first, then jest's own order. On 2 cores jest runs in band,
 * in one process: a fresh clone has no timing cache, so jest orders by file size and the search ran
 * 96th, on a heap grown by every suite before it, in 1,156 s instead of 180–225 s on its own.
 */
const FIRST = ['test/verify.test.ts'];

class LongestFirstSequencer extends Sequencer {
  sort(tests) {
    const sorted = super.sort(tests);
    const rank = (test) => {
      const i = FIRST.findIndex((name) => test.path.endsWith(name));
      return i === -1 ? FIRST.length : i;
    };
    return Promise.resolve(sorted).then((list) => [...list].sort((a, b) => rank(a) - rank(b)));
  }
}

module.exports = LongestFirstSequencer;
