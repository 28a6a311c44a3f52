import type { DurableClient } from 'durable-functions';
import {
  CAMPAIGN_ORCHESTRATOR,
  DurableCampaignLauncher,
  WAKE_EVENT,
  campaignInstanceId,
} from '../../functions/durable/campaigns';

/**
 * The Durable campaign launcher against a fake DurableClient that answers as durable-js 3.5.0 does over
 * the extension's HTTP API with `overridableExistingInstanceStates: NonRunningStates` (host.json):
 * getStatus rejects "HTTP 404" for an unknown instance, startNew over a running instance is refused,
 * raiseEvent resolves for a running instance and for a finished one (410), and rejects
 * "No instance with ID" for an unknown one (404).
 */
class FakeClient {
  instances = new Map<string, { runtimeStatus: string; input: unknown }>();
  starts = 0;
  events: { instanceId: string; name: string; data: unknown }[] = [];
  /** Let concurrent launches both see "absent" before either has started. */
  delayStart = 0;
  down = false;

  async getStatus(instanceId: string) {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:7071');
    const instance = this.instances.get(instanceId);
    if (!instance)
      throw new Error(`DurableClient error: Durable Functions extension replied with HTTP 404 response.`);
    return { instanceId, ...instance };
  }
  async startNew(name: string, options: { instanceId: string; input: unknown }) {
    expect(name).toBe(CAMPAIGN_ORCHESTRATOR);
    if (this.delayStart) await new Promise((r) => setTimeout(r, this.delayStart));
    const existing = this.instances.get(options.instanceId);
    if (existing && ['Pending', 'Running'].includes(existing.runtimeStatus))
      throw new Error(`An instance with ID '${options.instanceId}' already exists.`);
    this.starts += 1;
    this.instances.set(options.instanceId, { runtimeStatus: 'Running', input: options.input });
    return options.instanceId;
  }
  async raiseEvent(instanceId: string, name: string, data: unknown) {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:7071');
    const instance = this.instances.get(instanceId);
    if (!instance) throw new Error(`No instance with ID '${instanceId}' found.`);
    if (instance.runtimeStatus === 'Running') this.events.push({ instanceId, name, data });
  }
}

const setup = () => {
  const client = new FakeClient();
  return { client, launcher: new DurableCampaignLauncher(client as unknown as DurableClient) };
};

describe('DurableCampaignLauncher', () => {
  test('launch starts campaign:{id} with {campaignId}; a second launch of a running one does nothing', async () => {
    const { client, launcher } = setup();
    await launcher.launch('c-1');
    expect(client.instances.get('campaign:c-1')).toEqual({
      runtimeStatus: 'Running',
      input: { campaignId: 'c-1' },
    });
    await launcher.launch('c-1');
    expect(client.starts).toBe(1);
    // an instance continued as new is still the campaign's ticker
    client.instances.get('campaign:c-1')!.runtimeStatus = 'ContinuedAsNew';
    await launcher.launch('c-1');
    expect(client.starts).toBe(1);
  });

  test('an ended instance (Completed, Failed, Terminated) is started again: the campaign state is in the store', async () => {
    const { client, launcher } = setup();
    await launcher.launch('c-1');
    for (const ended of ['Completed', 'Failed', 'Terminated']) {
      client.instances.get('campaign:c-1')!.runtimeStatus = ended;
      await launcher.launch('c-1');
    }
    expect(client.starts).toBe(4);
  });

  test('concurrent launches: the extension refuses the later startNew, and its launch still succeeds', async () => {
    const { client, launcher } = setup();
    client.delayStart = 10;
    await Promise.all([launcher.launch('c-1'), launcher.launch('c-1'), launcher.launch('c-1')]);
    expect(client.starts).toBe(1);
  });

  test('wake raises `wake` on a running instance; one not ticking (or absent) is launched again', async () => {
    const { client, launcher } = setup();
    await launcher.launch('c-1');
    await launcher.wake('c-1');
    expect(client.events).toEqual([{ instanceId: 'campaign:c-1', name: WAKE_EVENT, data: {} }]);
    expect(client.starts).toBe(1);
    // its runner was terminated (or failed): the wake starts a new one, which ticks at once
    client.instances.get('campaign:c-1')!.runtimeStatus = 'Terminated';
    await launcher.wake('c-1');
    expect(client.instances.get('campaign:c-1')!.runtimeStatus).toBe('Running');
    expect(client.starts).toBe(2);
    await launcher.wake('c-none');
    expect(client.starts).toBe(3);
    expect(client.events).toHaveLength(1);
  });

  test('a task hub that does not answer: launch is OrchestrationStatusUnavailable (503), its text kept out of the message; wake shrugs', async () => {
    const { client, launcher } = setup();
    client.down = true;
    await expect(launcher.launch('c-1')).rejects.toMatchObject({
      code: 'OrchestrationStatusUnavailable',
      message: expect.not.stringMatching(/ECONNREFUSED/),
    });
    expect(client.starts).toBe(0);
    // wake is best effort: a change already saved is not answered 503 over it
    await expect(launcher.wake('c-1')).resolves.toBeUndefined();
  });

  test('instance ids: campaign:{id}, at most 256 characters, distinct for ids that share a long head', () => {
    expect(campaignInstanceId('c-1')).toBe('campaign:c-1');
    const long = 'a'.repeat(300);
    const a = campaignInstanceId(`${long}x`);
    const b = campaignInstanceId(`${long}y`);
    expect(a).toHaveLength(256);
    expect(a).not.toBe(b);
    expect(a).not.toMatch(/[/\\#?]/);
  });
});
