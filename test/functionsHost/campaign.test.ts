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

  /** Every id's route: where it is, and that no lock is left on it (nor listed as live). */
  async function expectUnlocked(ids: string[]): Promise<Map<string, unknown>> {
    const at = new Map<string, unknown>();
    for (const id of ids) {
      const route = (await json(`${host.api}/routes/${id}`)).body;
      expect({ id, lock: route.lock }).toEqual({ id, lock: null });
      at.set(id, route.location);
    }
    const live = (await json(`${host.api}/routes?locked=true&limit=1000`)).body.items as { id: string }[];
    expect(live.map((r) => r.id).filter((id) => ids.includes(id))).toEqual([]);
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

  test('a campaign cancelled while running: its running members cancelled, the pending never started, no lock left', async () => {
    const id = `cancel-${Date.now().toString(36)}`;
    const ids = await routes(id, 10);
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
        const first = await watch(id, (s) => s.counts.running === 5 || s.counts.pending < 5);
        expect(first.status.counts).toMatchObject({ total: 10, running: 5, pending: 5 });
        const began = Date.now();
        const cancel = await send('POST', `/campaigns/${id}/cancel`);
        expect(cancel.status).toBe(200);
        expect(cancel.body.status).toBe('Cancelling');
        const started = (await migrationsOf(id)).map((m) => m.migrationId).sort();
        expect(started).toHaveLength(5);

        const { status: ended } = await watch(id, (s) => s.status !== 'Cancelling');
        process.stdout.write(`functionsHost/campaign: cancel took effect after ${Date.now() - began} ms\n`);
        expect(ended.status).toBe('Cancelled');
        // the running members end as a migration cancel ends them: Cancelled before the swap, or
        // Completed when the ask came too late (AlreadySwapped); the pending ones are cancelled unstarted
        const migrations = await migrationsOf(id);
        expect(migrations.map((m) => m.migrationId).sort()).toEqual(started);
        for (const m of migrations) expect(['Cancelled', 'Completed']).toContain(m.status);
        const completed = migrations.filter((m) => m.status === 'Completed').map((m) => m.resourceId);
        process.stdout.write(
          `functionsHost/campaign: of the 5 running at the cancel, ${5 - completed.length} Cancelled, ${completed.length} Completed (swapped before the ask)\n`,
        );
        expect(ended.counts).toMatchObject({
          total: 10,
          pending: 0,
          running: 0,
          completed: completed.length,
          cancelled: 10 - completed.length,
        });
        const at = await expectUnlocked(ids);
        for (const r of ids)
          expect({ r, at: at.get(r) }).toEqual({ r, at: completed.includes(r) ? TO : FROM });
      },
    );
  });
});
