import { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { POISON_QUEUE, QUEUE } from '../functions/migrationQueue';
import hostJson from '../host.json';
import type { LogLine } from './server';

/**
 * The embedded host's stand-in for the Functions queue trigger, used when `AzureWebJobsStorage` is set
 * (Azurite: `UseDevelopmentStorage=true`). Same semantics as the host (the storage extension's
 * QueueProcessor): base64 message text, a visibility timeout while a message is handled, a failed
 * message made visible again after host.json's `visibilityTimeout` and, at its `maxDequeueCount`th
 * dequeue, copied to `migrations-poison` unchanged; a message the handler rejects goes there at once,
 * also unchanged (the reason is logged, not written: one poison shape for both hosts). One consumer
 * per queue: `migrations` by default, `campaigns` with `queues` naming it.
 */
export interface QueueConsumerOptions {
  connectionString: string;
  /**
   * What the handler made of a message (its id is the same on every delivery): `poison` (with the
   * reason) goes to the poison queue at once.
   */
  handle: (item: unknown, messageId: string) => Promise<QueueOutcome>;
  log: LogLine;
  /** The queue, its poison queue and what its messages start (for log lines); defaults to `migrations`. */
  queues?: { queue: string; poison: string; subject: string };
  pollMs?: number;
  /** How long a received message stays invisible while it is handled. */
  leaseSeconds?: number;
  /** Backoff before a failed message is visible again; defaults to host.json's. */
  retryAfterSeconds?: number;
  /** Dequeues before a failing message is poisoned; defaults to host.json's. */
  maxDequeueCount?: number;
}

export interface QueueOutcome {
  kind: string;
  reason?: string;
}

/** host.json's queue retry settings, the one home for both hosts. */
export const hostQueueRetry = {
  retryAfterSeconds: timeSpanSeconds(hostJson.extensions.queues.visibilityTimeout),
  maxDequeueCount: hostJson.extensions.queues.maxDequeueCount,
};

/** A host.json TimeSpan `[d.]hh:mm:ss` in whole seconds. */
export function timeSpanSeconds(value: string): number {
  const match = /^(?:(\d+)\.)?(\d{2}):(\d{2}):(\d{2})$/.exec(value);
  if (!match) throw new Error(`not a TimeSpan: ${value}`);
  const [, days, hours, minutes, seconds] = match;
  return ((Number(days ?? 0) * 24 + Number(hours)) * 60 + Number(minutes)) * 60 + Number(seconds);
}

export class LocalQueueConsumer {
  private readonly queue: QueueClient;
  private readonly poison: QueueClient;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private readonly names: { queue: string; poison: string; subject: string };

  constructor(private readonly options: QueueConsumerOptions) {
    this.names = options.queues ?? { queue: QUEUE, poison: POISON_QUEUE, subject: 'migration' };
    const service = QueueServiceClient.fromConnectionString(options.connectionString);
    this.queue = service.getQueueClient(this.names.queue);
    this.poison = service.getQueueClient(this.names.poison);
  }

  async start(): Promise<void> {
    await this.queue.createIfNotExists();
    await this.poison.createIfNotExists();
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
  }

  /** Handle whatever is visible now (tests call this instead of waiting for the poll). */
  async drainOnce(): Promise<number> {
    const { receivedMessageItems } = await this.queue.receiveMessages({
      numberOfMessages: 16,
      visibilityTimeout: this.options.leaseSeconds ?? 30,
    });
    for (const message of receivedMessageItems) {
      await this.process(message.messageId, message.popReceipt, message.messageText, message.dequeueCount);
    }
    return receivedMessageItems.length;
  }

  private async run(): Promise<void> {
    while (this.running) {
      let handled = 0;
      try {
        handled = await this.drainOnce();
      } catch (error) {
        this.options.log('warning', 'queue poll failed', {
          queue: this.names.queue,
          error: (error as Error).message,
        });
      }
      if (handled === 0 && this.running) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          setTimeout(resolve, this.options.pollMs ?? 1000).unref();
        });
      }
    }
  }

  private async process(id: string, popReceipt: string, text: string, dequeueCount: number): Promise<void> {
    const decoded = decodeBase64(text);
    const { queue, subject } = this.names;
    try {
      const outcome: QueueOutcome =
        decoded === undefined
          ? { kind: 'poison', reason: 'the message is not base64' }
          : await this.options.handle(decoded, id);
      if (outcome.kind === 'poison') {
        this.options.log('warning', `${subject} message rejected: ${outcome.reason ?? ''}`, {
          queue,
          messageId: id,
        });
        await this.poison.sendMessage(text);
      } else {
        this.options.log('information', `${subject} message ${outcome.kind}`, { queue, messageId: id });
      }
      await this.queue.deleteMessage(id, popReceipt);
    } catch (error) {
      const max = this.options.maxDequeueCount ?? hostQueueRetry.maxDequeueCount;
      this.options.log('warning', `${subject} message failed (dequeue ${dequeueCount} of ${max})`, {
        queue,
        messageId: id,
        error: (error as Error).message,
      });
      if (dequeueCount >= max) {
        await this.poison.sendMessage(text);
        await this.queue.deleteMessage(id, popReceipt);
      } else {
        // Visible again after the backoff, as the host's ReleaseMessageAsync does.
        await this.queue.updateMessage(
          id,
          popReceipt,
          undefined,
          this.options.retryAfterSeconds ?? hostQueueRetry.retryAfterSeconds,
        );
      }
    }
  }
}

/** The host's decoding: base64 text to a string (its JSON is parsed by the handler). */
export function decodeBase64(text: string): string | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  return Buffer.from(text, 'base64').toString('utf8');
}
