import { QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { POISON_QUEUE, QUEUE, type MessageOutcome } from '../functions/migrationQueue';
import type { LogLine } from './server';

/**
 * The embedded host's stand-in for the Functions queue trigger, used when `AzureWebJobsStorage` is set
 * (Azurite: `UseDevelopmentStorage=true`). Same semantics as the host: base64 message text, a
 * visibility timeout while a message is handled, a failed message retried until its fifth dequeue and
 * then moved to `migrations-poison`; a message the handler rejects goes there at once.
 */
export interface QueueConsumerOptions {
  connectionString: string;
  handle: (item: unknown) => Promise<MessageOutcome>;
  log: LogLine;
  pollMs?: number;
  visibilityTimeoutSeconds?: number;
  maxDequeueCount?: number;
}

export class LocalQueueConsumer {
  private readonly queue: QueueClient;
  private readonly poison: QueueClient;
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly options: QueueConsumerOptions) {
    const service = QueueServiceClient.fromConnectionString(options.connectionString);
    this.queue = service.getQueueClient(QUEUE);
    this.poison = service.getQueueClient(POISON_QUEUE);
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
      visibilityTimeout: this.options.visibilityTimeoutSeconds ?? 30,
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
        this.options.log('warning', 'queue poll failed', { queue: QUEUE, error: (error as Error).message });
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
    try {
      const outcome: MessageOutcome =
        decoded === undefined
          ? { kind: 'poison', reason: 'the message is not base64' }
          : await this.options.handle(decoded);
      if (outcome.kind === 'poison') {
        this.options.log('warning', `migration message rejected: ${outcome.reason}`, {
          queue: QUEUE,
          messageId: id,
        });
        await this.poison.sendMessage(text);
      } else {
        this.options.log('information', `migration message ${outcome.kind}`, { queue: QUEUE, messageId: id });
      }
      await this.queue.deleteMessage(id, popReceipt);
    } catch (error) {
      const max = this.options.maxDequeueCount ?? 5;
      this.options.log('warning', `migration message failed (dequeue ${dequeueCount} of ${max})`, {
        queue: QUEUE,
        messageId: id,
        error: (error as Error).message,
      });
      if (dequeueCount >= max) {
        await this.poison.sendMessage(text);
        await this.queue.deleteMessage(id, popReceipt);
      } else {
        // Visible again shortly, as the host's retry does.
        await this.queue.updateMessage(id, popReceipt, undefined, 1);
      }
    }
  }
}

/** The host's decoding: base64 text to a string (its JSON is parsed by the handler). */
export function decodeBase64(text: string): string | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) return undefined;
  return Buffer.from(text, 'base64').toString('utf8');
}
