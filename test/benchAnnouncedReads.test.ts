import { runAnnouncedReads } from '../bench/announcedReads';

/**
 * The announced-reads benchmark at a tiny size (bench/announcedReads.ts): counts, never timings. Outside the
 * write window an announced lock costs no write-region read (library and HTTP server alike) while a legacy
 * lock costs them; in the window every resolve is answered by a write-region read within the join bound
 * under both rules, and no write is allowed on a read begun after the write lock committed.
 */
test('announced-reads: 0 write-region reads outside the window, every resolve read through in it', async () => {
  const { data } = await runAnnouncedReads({
    holdSeconds: 20,
    httpHoldSeconds: 2,
    resolvesPerSecond: 100,
    writeRegionReadMs: 50,
    replicaReadMs: 5,
    writeHoldSeconds: 5,
    afterSwapSeconds: 5,
  });
  const [legacy, announced] = data.library;
  expect(legacy!.rule).toBe('legacy');
  expect(announced!.rule).toBe('announced');

  // Held in hard-delete: the legacy lock reads the write region once per joined read (50 ms + the 10 ms
  // step), the announced one never, and refreshes from the replica at most once per local TTL (60 s).
  // (The legacy count is also the control: the same counter, on the same store wrapper, does see reads.)
  expect(Math.abs(legacy!.hold.writeRegionReads - 2000 / 6)).toBeLessThan(1);
  expect(announced!.hold).toMatchObject({ resolves: 2000, writeRegionReads: 0, p99Ms: 0 });
  expect(announced!.hold.replicaReads).toBeLessThanOrEqual(1);
  expect(announced!.write.before.writeRegionReads).toBe(0);

  // The window and the write lock: every resolve answered by a write-region read begun within the join bound.
  for (const run of data.library) {
    expect(run.write.writeLock.notReadThrough).toBe(0);
    expect(run.write.writeLock.writesAllowed.afterCommit).toBe(0);
    expect(run.write.writeLock.writeRegionReads).toBeGreaterThan(0);
  }
  expect(announced!.write.window!.writeRegionReads).toBeGreaterThan(0);

  // HTTP: a legacy lock is fetched, and read through on the server, by every resolve; an announced one not.
  const [httpLegacy, httpAnnounced] = data.http;
  expect(httpLegacy).toMatchObject({ resolves: 200, fetches: 200, serverWriteRegionReads: 200 });
  expect(httpAnnounced).toMatchObject({ resolves: 200, serverWriteRegionReads: 0 });
  expect(httpAnnounced!.fetches).toBeLessThanOrEqual(1);
}, 120_000);
