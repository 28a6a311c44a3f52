const Sequencer = require('@jest/test-sequencer').default;

/**
 * The longest suites first, then jest's own order. A fresh clone (CI) has no timing cache, so jest orders
 * by file size, and a long suite that starts last keeps the run going alone, on a heap grown by every
 * suite before it. Started first, the long suites run while the short ones fill the other worker.
 */
const FIRST = [
  'test/verify.test.ts',
  'test/campaign/fleetCampaign.test.ts',
  'test/fleetCoalescing.test.ts',
  'test/docs/examples.test.ts',
  // the real-engine step (jest.functions.config.js), its longest first
  'test/functionsHost/deploy.test.ts',
  'test/functionsHost/killRestart.test.ts',
  'test/functionsHost/verifyRetryWindow.test.ts',
  'test/functionsHost/engineBench.test.ts',
  'test/functionsHost/queue.test.ts',
  'test/drill.test.ts',
  'test/statusPage.test.ts',
  'test/bench.test.ts',
];

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
