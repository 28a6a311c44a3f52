/**
 * The real-engine benchmark's load generator, a process of its own (bench/durableEngine.ts forks it), so
 * its requests and its JSON parsing take no CPU from the process that reads the task hub and the
 * clocks. One job by IPC: create the routes (not measured), then start every migration at once through
 * POST /api/migrations and answer with when each POST was answered and its migration id.
 */

export interface LoadJob {
  api: string;
  resourceIds: string[];
  target: { region: string };
  from: { region: string };
}

export interface LoadAnswer {
  /** Epoch ms the first POST was sent. */
  startedAt: number;
  /** Epoch ms each POST was answered, in the order of resourceIds. */
  answeredAt: number[];
  statuses: number[];
  migrationIds: string[];
}

const headers = { 'content-type': 'application/json' };

async function inBatches<T>(items: T[], size: number, each: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(each));
}

export async function runLoad(job: LoadJob): Promise<LoadAnswer> {
  await inBatches(job.resourceIds, 10, async (id) => {
    const put = await fetch(`${job.api}/routes/${id}`, {
      method: 'PUT',
      headers,
      body: JSON.stringify({ location: job.from }),
    });
    await put.arrayBuffer();
    if (put.status !== 201) throw new Error(`PUT /routes/${id}: ${put.status}`);
  });
  const startedAt = Date.now();
  const answers = await Promise.all(
    job.resourceIds.map(async (resourceId) => {
      const response = await fetch(`${job.api}/migrations`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ resourceId, target: job.target }),
      });
      const body = (await response.json()) as { migrationId?: string };
      return { at: Date.now(), status: response.status, migrationId: String(body.migrationId) };
    }),
  );
  return {
    startedAt,
    answeredAt: answers.map((a) => a.at),
    statuses: answers.map((a) => a.status),
    migrationIds: answers.map((a) => a.migrationId),
  };
}

if (require.main === module) {
  process.once('message', (job: LoadJob) => {
    runLoad(job).then(
      (answer) => process.send?.({ answer }, () => process.exit(0)),
      (error: unknown) => process.send?.({ error: String(error) }, () => process.exit(1)),
    );
  });
}
