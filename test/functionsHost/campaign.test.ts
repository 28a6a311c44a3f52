import { campaignInstanceId } from '../../functions/durable/campaigns';
import type { CampaignStatus } from '../../shared/campaign/types';
import type { MigrationStatus } from '../../shared/migration/types';
import { poll } from '../support/poll';
import { type FunctionsHost, explained, hostSecret, json, startHost } from './host';

/**
 * Campaigns on the real Durable extension (hosts/webjobs through `npm run start:functions`), through the
 * HTTP API alone: each campaign is one `campaignOrchestrator` instance whose `campaignTick` activity (with
 * a Durable client input, to start members) ticks on durable timers, woken early by a `wake` event when a
 * pause, resume, cancel or new limits are saved. Lock-only members (no participant), so a member is the
 * pre-lock, the dev convergence delay and the swap. One host for the file; a failure prints the campaign
 * orchestration's history.
 */

jest.setTimeout(180_000);

const FROM = { region: 'westeurope' };
const TO = { region: 'eastus' };

describe('campaigns on the real Durable extension', () => {
  let host: FunctionsHost;

  beforeAll(async () => {
    host = await startHost();
    process.stdout.write(`functionsHost/campaign: host listening after ${host.startedMs} ms\n`);
  }, 620_000);

  afterAll(async () => {
    await host?.stop();
  });

  const send = (method: string, path: string, body: unknown = {}) =>
    json(`${host.api}${path}`, { method, body: JSON.stringify(body) });

  async function routes(prefix: string, n: number): Promise<string[]> {
    const ids = Array.from({ length: n }, (_, i) => `${prefix}-r${i + 1}`);
    for (const id of ids) expect((await send('PUT', `/routes/${id}`, { location: FROM })).status).toBe(201);
    return ids;
  }

  const campaign = async (id: string) =>
    (await json(`${host.api}/campaigns/${encodeURIComponent(id)}`)).body as unknown as CampaignStatus;

  /** Poll the campaign until `until` holds, keeping the most members ever seen running at once. */
  async function watch(id: string, until: (s: CampaignStatus) => boolean, seen = { maxRunning: 0 }) {
    const status = await poll(
      async () => {
        const s = await campaign(id);
        seen.maxRunning = Math.max(seen.maxRunning, s.counts.running);
        return s;
      },
      until,
      120_000,
    );
    return { status, seen };
  }

  async function migrationsOf(id: string): Promise<MigrationStatus[]> {
    const list = await json(`${host.api}/migrations?campaignId=${encodeURIComponent(id)}&limit=1000`);
    expect(list.status).toBe(200);
    return list.body.items as MigrationStatus[];
  }

  /** Those of `ids` that GET /routes?locked=true lists: under a live lock now. */
  async function liveLocks(ids: string[]): Promise<string[]> {
    const page = (await json(`${host.api}/routes?locked=true&limit=1000`)).body;
    expect(page.continuation).toBeNull();
    return (page.items as { resourceId: string }[]).map((r) => r.resourceId).filter((id) => ids.includes(id));
  }

  /** Every id's route: where it is, and that no lock is left on it (nor listed as live). */
  async function expectUnlocked(ids: string[]): Promise<Map<string, unknown>> {
    const at = new Map<string, unknown>();
    for (const id of ids) {
      const route = (await json(`${host.api}/routes/${id}`)).body;
      expect({ id, lock: route.lock }).toEqual({ id, lock: null });
      at.set(id, route.location);
    }
    expect(await liveLocks(ids)).toEqual([]);
    return at;
  }

  /**
   * The campaign's runner once the campaign has ended: its orchestration ends too, with the campaign's
   * status as its output, rather than tick on (read from the Durable HTTP API on the front door).
   */
  async function expectRunnerEnded(id: string, status: string): Promise<void> {
    const code = encodeURIComponent(hostSecret(host));
    const url = `${host.origin}/runtime/webhooks/durabletask/instances/${encodeURIComponent(campaignInstanceId(id))}?code=${code}`;
    const instance = await poll(
      async () => (await json(url)).body,
      (body) => body.runtimeStatus !== 'Running' && body.runtimeStatus !== 'Pending',
      30_000,
    );
    expect(instance).toMatchObject({
      name: 'campaignOrchestrator',
      runtimeStatus: 'Completed',
      output: status,
    });
  }

  test('20 routes, maxConcurrent 5: paused (no new start), PATCHed to 10 (taken up), resumed, Completed', async () => {
    const id = `camp-${Date.now().toString(36)}`;
    const ids = await routes(id, 20);
    const began = Date.now();
    const created = await send('POST', '/campaigns', {
      campaignId: id,
      target: TO,
      resources: ids,
      maxConcurrent: 5,
    });
    expect(created.status).toBe(202);
    await explained(
      host,
      () => [campaignInstanceId(id)],
      async () => {
        // the first wave: 5 running, none ended yet (a member holds its pre-lock for the convergence
        // delay), so no tick can have a further start reserved when the pause lands
        const first = await watch(id, (s) => s.counts.running === 5 || s.counts.pending < 15);
        expect(first.status.counts).toMatchObject({ total: 20, running: 5, pending: 15 });
        const paused = await send('POST', `/campaigns/${id}/pause`);
        expect(paused.status).toBe(200);
        expect(paused.body.status).toBe('Paused');

        // the 5 finish; nothing new starts while paused, for several ticks after they have
        const drained = await watch(id, (s) => s.counts.running === 0);
        expect(drained.status.counts).toMatchObject({ pending: 15, completed: 5 });
        await new Promise((r) => setTimeout(r, 4_000)); // four dev ticks (1 s)
        const still = await campaign(id);
        expect(still.status).toBe('Paused');
        expect(still.counts).toMatchObject({ pending: 15, running: 0, completed: 5 });
        expect(await migrationsOf(id)).toHaveLength(5);

        const patched = await send('PATCH', `/campaigns/${id}`, { maxConcurrent: 10 });
        expect(patched.status).toBe(200);
        expect(patched.body).toMatchObject({ status: 'Paused', limits: { maxConcurrent: 10 } });
        const resumed = await send('POST', `/campaigns/${id}/resume`);
        expect(resumed.status).toBe(200);
        expect(resumed.body.status).toBe('Running');

        // the new limit is taken up: more than the old 5 run at once, never more than 10
        const { status: done, seen } = await watch(id, (s) => s.status !== 'Running');
        process.stdout.write(
          `functionsHost/campaign: 20 members ${done.status} after ${Date.now() - began} ms (most running at once after the PATCH: ${seen.maxRunning})\n`,
        );
        expect(done.status).toBe('Completed');
        expect(done.counts).toMatchObject({ total: 20, completed: 20, pending: 0, running: 0 });
        expect(seen.maxRunning).toBeGreaterThan(5);
        expect(seen.maxRunning).toBeLessThanOrEqual(10);
        const migrations = await migrationsOf(id);
        expect(migrations.map((m) => m.status)).toEqual(Array(20).fill('Completed'));
        expect(new Set(migrations.map((m) => m.resourceId))).toEqual(new Set(ids));
        const at = await expectUnlocked(ids);
        expect([...at.values()]).toEqual(Array(20).fill(TO));
        await expectRunnerEnded(id, 'Completed');
      },
    );
  });

  test('a campaign cancelled while running: its running members Cancelled, their locks released, the pending never started', async () => {
    const id = `cancel-${Date.now().toString(36)}`;
    const ids = await routes(id, 10);
    // a cutover window half an hour away (within the dev pre-lock cap of an hour): each started member
    // pre-locks, escalates to hard-delete and waits for the window holding that lock, so the cancel
    // finds every running member before its swap, whatever the machine's speed
    const window = { notBefore: new Date(Date.now() + 30 * 60_000).toISOString() };
    const created = await send('POST', '/campaigns', {
      campaignId: id,
      target: TO,
      resources: ids,
      maxConcurrent: 5,
      window,
    });
    expect(created.status).toBe(202);
    await explained(
      host,
      () => [campaignInstanceId(id)],
      async () => {
        const first = await watch(id, (s) => s.counts.running === 5 || s.counts.pending < 5);
        expect(first.status.counts).toMatchObject({ total: 10, running: 5, pending: 5 });
        const waiting = await poll(
          () => migrationsOf(id),
          (ms) => ms.length === 5 && ms.every((m) => m.waitingForWindow !== undefined),
          60_000,
        );
        const started = waiting.map((m) => m.migrationId).sort();
        for (const m of waiting) {
          const route = (await json(`${host.api}/routes/${m.resourceId}`)).body;
          expect({ id: m.resourceId, lock: route.lock }).toMatchObject({
            id: m.resourceId,
            lock: { phase: 'hardDelete' },
          });
        }

        expect((await liveLocks(ids)).sort()).toEqual(waiting.map((m) => m.resourceId).sort());

        const began = Date.now();
        const cancel = await send('POST', `/campaigns/${id}/cancel`);
        expect(cancel.status).toBe(200);
        expect(cancel.body.status).toBe('Cancelling');
        const { status: ended } = await watch(id, (s) => s.status !== 'Cancelling');
        process.stdout.write(`functionsHost/campaign: cancel took effect after ${Date.now() - began} ms\n`);
        expect(ended.status).toBe('Cancelled');
        // the running members cancelled as POST /migrations/{id}/cancel cancels them (before the swap:
        // Cancelled, the lock released); the pending ones cancelled without a migration
        const migrations = await migrationsOf(id);
        expect(migrations.map((m) => m.migrationId).sort()).toEqual(started);
        expect(migrations.map((m) => m.status)).toEqual(Array(5).fill('Cancelled'));
        expect(ended.counts).toMatchObject({
          total: 10,
          pending: 0,
          running: 0,
          completed: 0,
          cancelled: 10,
        });
        const at = await expectUnlocked(ids);
        expect([...at.values()]).toEqual(Array(10).fill(FROM));
        await expectRunnerEnded(id, 'Cancelled');
      },
    );
  });
});
