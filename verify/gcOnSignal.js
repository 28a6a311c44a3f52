'use strict';
// Preloaded into the soak's host process only (with --expose-gc): SIGUSR2 runs a full garbage collection,
// so the soak can read resident memory at a settled point instead of wherever V8's heap growth stands.
process.on('SIGUSR2', () => {
  if (typeof globalThis.gc === 'function') globalThis.gc();
});
