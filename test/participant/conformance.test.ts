import { MessageStore as HandWrittenStore } from '../../bench/handWritten/messageStore';
import { TestRoutingClient, states } from '../../shared/core/clientTesting';
import { MessageStore, type MessageStoreOptions } from '../../examples/message-store/service';
import { Nonconformance, REGIONS, type Subject, conformanceChecks } from './conformance';

/**
 * The participant conformance suite (./conformance.ts, from docs/design.md §6.5) against the example
 * message store built on `@routelock/participant`, and against the hand-written participant the write-lock
 * bench compares it with (the suite is about the contract, not the SDK). The negative control: the
 * example built to ignore supersession (`ignoreSupersede`, its copy ignores the job's signal) is caught
 * landing the older copy.
 */

type Store = MessageStore | HandWrittenStore;
type Build = (options: MessageStoreOptions) => Store;

const stores: Store[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function subject(build: Build, options: Partial<MessageStoreOptions> = {}): Promise<Subject> {
  let delay: (stepAttempt: number) => number = () => 100;
  let failures = 0;
  const routing = new TestRoutingClient({ clockSkewSeconds: 0 });
  const store = build({
    regions: { [REGIONS.source]: ':memory:', [REGIONS.target]: ':memory:' },
    copyDelayMs: (job) => delay(job.stepAttempt),
    failCopy: () => failures-- > 0,
    routing,
    ...options,
  });
  stores.push(store);
  await store.listen();
  const region = (which: 'source' | 'target') => store.stores.get(REGIONS[which]);
  return {
    url: `${store.url}/migrate`,
    seed: (id) => {
      region('source')?.put(id, 'msg-1', 'hello', 1);
      region('source')?.put(id, 'msg-2', 'world', 2);
    },
    held: (id, which) => {
      const rows =
        region(which)
          ?.list(id)
          .filter((r) => !r.deleted) ?? [];
      return rows.length === 0 ? '' : JSON.stringify(rows.map((r) => [r.messageId, r.text, r.updatedAt]));
    },
    editAtTarget: (id) => region('target')?.put(id, 'msg-1', 'edited after the swap', 10),
    failNextCopy: () => void (failures = 1),
    copyDelay: (d) => void (delay = d),
    routeAt: (id, which) =>
      routing.set(id, which === null ? states.notFound() : states.unlocked({ at: REGIONS[which] })),
  };
}

const checks = Object.entries(conformanceChecks);

describe.each<[string, Build]>([
  ['the example on @routelock/participant', (o) => new MessageStore(o)],
  ['the hand-written participant (bench/handWritten)', (o) => new HandWrittenStore(o)],
])('%s conforms', (_, build) => {
  test.each(checks)('%s', async (_rule, check) => {
    await check(await subject(build));
  });
});

test('negative control: a participant that ignores supersession is caught landing the older copy', async () => {
  const check = conformanceChecks['supersede (409)'] as (s: Subject) => Promise<void>;
  const control = await subject((o) => new MessageStore(o), { ignoreSupersede: true });
  await expect(check(control)).rejects.toThrow(Nonconformance);
  const again = await subject((o) => new MessageStore(o), { ignoreSupersede: true });
  await expect(check(again)).rejects.toThrow(
    /supersede: the superseded older copy landed over the live target/,
  );
});
