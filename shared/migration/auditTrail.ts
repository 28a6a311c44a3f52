import { type AuditRecord, auditRecordFor } from '../core/audit';
import type { LocationDocument, StoredDocument } from '../core/lock/document';
import type { AuditLedger } from '../core/store/ports/audit';
import type {
  ListOptions,
  ListPage,
  LocationStore,
  PriorityOption,
  ReadOptions,
  StoreCounters,
} from '../core/store/ports/locations';
import type { TelemetrySink } from './telemetry/sink';

/**
 * The write path of the audit ledger (the imperative shell around `auditRecordFor`): right after a
 * routing write commits, its record is appended, retried with a bounded backoff. Routes and audit are
 * separate containers, so no transaction holds both: when the ledger stays down the record is left to
 * the change feed (the backstop, shared/migration/telemetry/changeHandler.ts) and the gap is reported as the
 * event `AuditRecordDeferred`. It never fails or undoes the committed write, and never changes its answer.
 */

/** Waits between attempts: four attempts in about a second, then the backstop's turn. */
export const auditRetryDelaysMs: readonly number[] = [50, 200, 800];

export interface AuditTrailOptions {
  ledger: AuditLedger;
  sink: TelemetrySink;
  retryDelaysMs?: readonly number[];
  /** Tests pass a recorder; production waits on real timers. */
  sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class AuditTrail {
  private readonly ledger: AuditLedger;
  private readonly sink: TelemetrySink;
  private readonly delays: readonly number[];
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(options: AuditTrailOptions) {
    this.ledger = options.ledger;
    this.sink = options.sink;
    this.delays = options.retryDelaysMs ?? auditRetryDelaysMs;
    this.sleep = options.sleep ?? realSleep;
  }

  /** The record a committed document version calls for, appended; whether it landed (none needed: true). */
  recordVersion(doc: LocationDocument): Promise<boolean> {
    const record = auditRecordFor(doc);
    return record ? this.append(record) : Promise.resolve(true);
  }

  /** Append a record of something already committed: retried, never thrown; false when left to the backstop. */
  async append(record: AuditRecord): Promise<boolean> {
    let lastError: unknown;
    for (let attempt = 0; attempt <= this.delays.length; attempt += 1) {
      if (attempt > 0) await this.sleep(this.delays[attempt - 1] as number);
      try {
        await this.ledger.append(record);
        return true;
      } catch (error) {
        lastError = error;
      }
    }
    const code = (lastError as { code?: unknown } | undefined)?.code;
    this.sink.event({
      name: 'AuditRecordDeferred',
      properties: {
        resourceId: record.resourceId,
        op: record.op,
        recordId: record.id,
        error: typeof code === 'string' ? code : 'error',
      },
      measurements: { attempts: this.delays.length + 1 },
    });
    return false;
  }

  /**
   * The ledger as the services that append records of their own commits see it (force-release
   * requests and approvals): `append` is this trail's, reads go to the ledger.
   */
  asLedger(): AuditLedger {
    return {
      append: async (record) => {
        await this.append(record);
      },
      list: (resourceId, limit) => this.ledger.list(resourceId, limit),
    };
  }
}

/**
 * The location store with the audit write path on it: each version a `create` or `replace` committed is
 * handed to the trail before the write's answer is returned. The one home of "after a committed
 * mutation, append its audit record": every router over this store (the serving one, the probe's) gets
 * it, and it sees exactly the versions the change feed sees.
 */
export class AuditedLocationStore implements LocationStore {
  /** The inner store's conditional read, when it has one (a read: nothing to audit). */
  readonly readIfChanged: LocationStore['readIfChanged'];

  constructor(
    private readonly inner: LocationStore,
    private readonly trail: AuditTrail,
  ) {
    const conditional = inner.readIfChanged?.bind(inner);
    this.readIfChanged = conditional;
  }

  get kind(): string {
    return this.inner.kind;
  }
  get counters(): StoreCounters {
    return this.inner.counters;
  }
  /** The store underneath (adapter checks such as the account's write regions look at it). */
  get unwrapped(): LocationStore {
    return this.inner;
  }

  read(id: string, options: ReadOptions): Promise<StoredDocument> {
    return this.inner.read(id, options);
  }
  async create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    const written = await this.inner.create(doc, options);
    await this.trail.recordVersion(written.doc);
    return written;
  }
  async replace(doc: LocationDocument, ifMatch: string, options?: PriorityOption): Promise<StoredDocument> {
    const written = await this.inner.replace(doc, ifMatch, options);
    await this.trail.recordVersion(written.doc);
    return written;
  }
  delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    return this.inner.delete(id, ifMatch, options);
  }
  list(options: ListOptions): Promise<ListPage> {
    return this.inner.list(options);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
