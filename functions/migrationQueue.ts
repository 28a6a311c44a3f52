import { type InvocationContext, app, output } from '@azure/functions';
import * as df from 'durable-functions';
import { isRouteLockError } from '../shared/core/errors';
import type { MigrationService } from '../shared/migration/service';
import { inFunctionsHost } from './http/endpoint';
import { startMigrationBody } from './http/validation';
import { type Services, onServices } from './services';

/**
 * Queue trigger on `migrations`: messages are base64 JSON `{resourceId, target, migrationId?}` (the
 * host decodes them). An invalid message, or one for a route that does not exist, is logged with the
 * reason and sent to `migrations-poison` at once: retrying cannot fix it. A transient failure throws,
 * so the host retries it after host.json's `visibilityTimeout` and, at `maxDequeueCount` (5), copies
 * it to the poison queue itself. Either way the poison queue holds the original message, nothing
 * added: the host's own copy is the message body unchanged (QueueProcessor.CopyMessageToPoisonQueueAsync
 * in the storage extension), so a rejected message is written the same way and can be re-sent as is.
 */

export const QUEUE = 'migrations';
export const POISON_QUEUE = 'migrations-poison';

export const poisonOutput = output.storageQueue({
  queueName: POISON_QUEUE,
  connection: 'AzureWebJobsStorage',
});

export type MessageOutcome =
  | { kind: 'started' | 'joined'; migrationId: string }
  | { kind: 'poison'; reason: string }
  | { kind: 'skipped'; reason: string };

/** Decode what the host hands over: an object when the message was JSON, else a string (both queues). */
export function asObject(item: unknown): unknown {
  if (typeof item !== 'string') return item;
  try {
    return JSON.parse(item);
  } catch {
    return undefined;
  }
}

export async function handleMigrationMessage(
  item: unknown,
  migrations: MigrationService,
): Promise<MessageOutcome> {
  const value = asObject(item);
  if (value === undefined) return { kind: 'poison', reason: 'the message is not JSON' };
  const parsed = startMigrationBody.safeParse(value);
  if (!parsed.success) {
    return {
      kind: 'poison',
      reason: `invalid migration message: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ')}`,
    };
  }
  const { dryRun, ...request } = parsed.data;
  if (dryRun === true) {
    return {
      kind: 'poison',
      reason: 'a dry run is not accepted on the queue: a queue cannot answer (POST /api/migrations)',
    };
  }
  try {
    const started = await migrations.start(request);
    return { kind: started.created ? 'started' : 'joined', migrationId: started.migrationId };
  } catch (error) {
    if (
      isRouteLockError(error, 'NotFound') ||
      isRouteLockError(error, 'BadRequest') ||
      isRouteLockError(error, 'RegionNotAllowed')
    ) {
      return { kind: 'poison', reason: error.message };
    }
    if (isRouteLockError(error, 'MigrationInProgress')) return { kind: 'skipped', reason: error.message };
    throw error; // transient: let the queue retry it
  }
}

/**
 * What goes to `migrations-poison` for a message the handler rejects: the message as it was sent. The
 * host hands over a JSON message parsed, so it is written back as JSON text; the output binding
 * base64-encodes it as the trigger expects.
 */
export function poisonCopy(item: unknown): string {
  return typeof item === 'string' ? item : JSON.stringify(item);
}

export async function migrationQueueHandler(
  item: unknown,
  context: InvocationContext,
  { migrations }: Pick<Services, 'migrations'>,
): Promise<void> {
  const outcome = await handleMigrationMessage(item, migrations(context));
  if (outcome.kind === 'poison') {
    context.warn(`migration message rejected: ${outcome.reason}`);
    context.extraOutputs.set(poisonOutput, poisonCopy(item));
  } else if (outcome.kind === 'skipped') {
    context.warn(`migration message skipped: ${outcome.reason}`);
  } else {
    context.log(`migration ${outcome.kind}: ${outcome.migrationId}`);
  }
}

if (inFunctionsHost()) {
  app.storageQueue('migrationQueue', {
    queueName: QUEUE,
    connection: 'AzureWebJobsStorage',
    extraInputs: [df.input.durableClient()],
    extraOutputs: [poisonOutput],
    handler: onServices(migrationQueueHandler),
  });
}
