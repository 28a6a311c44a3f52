import {
  type Container,
  CosmosClient,
  type CosmosClientOptions,
  type IndexingPolicy,
  type ItemDefinition,
  PriorityLevel,
} from '@azure/cosmos';
import { DefaultAzureCredential, type TokenCredential } from '@azure/identity';
import { Agent } from 'node:https';
import { RouteLockError } from '../../errors';
import type { LocationDocument, StoredDocument } from '../../lock/document';
import { decodeContinuation, encodeContinuation } from '../continuation';
import { notFound, routeSubject } from '../errors';
import {
  type ChangeListing,
  type ChangedListOptions,
  type ListOptions,
  type ListPage,
  type LocationStore,
  type PriorityOption,
  type ReadOptions,
  countRead,
  newCounters,
} from '../ports/locations';
import { storeError, withoutSystemFields } from './common';

/**
 * Cosmos DB adapter. Point reads and ETag-conditional replaces on container `locations` (pk `/id`).
 * Two clients so a "nearest" read goes to the preferred (local) region and a "writeRegion" read goes
 * to the account's single write region, which the account description names.
 *
 * In Azure it authenticates with the managed identity (DefaultAzureCredential) and never a key; a key
 * is accepted only for local emulators, and then (and only then) the database and container are
 * created when missing: under managed identity the data-plane role cannot create them, Bicep does.
 */

export interface CosmosStoreOptions {
  endpoint: string;
  key?: string | undefined;
  /** Accept a self-signed certificate. Only for loopback emulators (config refuses anything else). */
  disableTlsVerify?: boolean;
  database: string;
  container: string;
  /** Further containers (partition key `/id` unless `partitionKeys` says) created alongside `container` when a key is used. */
  extraContainers?: string[];
  /** The partition key path of a container created here, by its id (absent: `/id`). */
  partitionKeys?: Record<string, string>;
  /** The indexing policy of a container created here, by its id (absent: the default policy). */
  indexingPolicies?: Record<string, IndexingPolicy>;
  preferredRegion?: string | undefined;
  credential?: TokenCredential;
}

export interface CosmosAccountInfo {
  writeRegion: string | undefined;
  readRegions: string[];
  multipleWriteLocations: boolean;
  consistency: string | undefined;
}

type CosmosItem = LocationDocument & ItemDefinition & { _etag?: string };

/** The SDK's request option (header `x-ms-cosmos-priority-level`); none leaves the account's default. */
function priorityLevel({ priority }: PriorityOption = {}): { priorityLevel?: PriorityLevel } {
  if (priority === undefined) return {};
  return { priorityLevel: priority === 'low' ? PriorityLevel.Low : PriorityLevel.High };
}

export class CosmosStore implements LocationStore, ChangeListing {
  readonly kind = 'cosmos';
  readonly counters = newCounters();

  private constructor(
    private readonly nearestClient: CosmosClient,
    private readonly writeClient: CosmosClient,
    private readonly nearest: Container,
    private readonly writeRegion: Container,
    readonly account: CosmosAccountInfo,
    private readonly databaseName: string,
  ) {}

  static async connect(options: CosmosStoreOptions): Promise<CosmosStore> {
    const base: CosmosClientOptions = {
      endpoint: options.endpoint,
      ...(options.key
        ? { key: options.key }
        : { aadCredentials: options.credential ?? new DefaultAzureCredential() }),
      ...(options.disableTlsVerify
        ? { agent: new Agent({ rejectUnauthorized: false, keepAlive: true }) }
        : {}),
      connectionPolicy: {
        enableEndpointDiscovery: true,
        requestTimeout: 10_000,
        // The router sits on the request path: fail fast to 503 rather than queue behind throttling.
        retryOptions: { maxRetryAttemptCount: 3, maxWaitTimeInSeconds: 5 },
        ...(options.preferredRegion ? { preferredLocations: [options.preferredRegion] } : {}),
      },
    };
    const nearestClient = new CosmosClient(base);
    let account: CosmosAccountInfo;
    try {
      const { resource } = await nearestClient.getDatabaseAccount();
      account = {
        writeRegion: resource?.writableLocations[0]?.name,
        readRegions: resource?.readableLocations.map((l) => l.name) ?? [],
        multipleWriteLocations: resource?.enableMultipleWritableLocations ?? false,
        consistency: resource?.consistencyPolicy,
      };
    } catch (error) {
      throw storeError(error, '(account)');
    }
    const writeClient = new CosmosClient({
      ...base,
      connectionPolicy: {
        ...base.connectionPolicy,
        ...(account.writeRegion ? { preferredLocations: [account.writeRegion] } : {}),
      },
    });

    try {
      if (options.key) {
        const { database } = await writeClient.databases.createIfNotExists({ id: options.database });
        for (const id of [options.container, ...(options.extraContainers ?? [])]) {
          const indexingPolicy = options.indexingPolicies?.[id];
          await database.containers.createIfNotExists({
            id,
            partitionKey: { paths: [options.partitionKeys?.[id] ?? '/id'] },
            ...(indexingPolicy ? { indexingPolicy } : {}),
          });
        }
      }
    } catch (error) {
      throw storeError(error, '(setup)');
    }
    const container = (client: CosmosClient) =>
      client.database(options.database).container(options.container);
    return new CosmosStore(
      nearestClient,
      writeClient,
      container(nearestClient),
      container(writeClient),
      account,
      options.database,
    );
  }

  /** Another container of the same database, through the write-region client. */
  containerNamed(name: string): Container {
    return this.writeClient.database(this.databaseName).container(name);
  }

  async read(id: string, options: ReadOptions): Promise<StoredDocument> {
    const { from } = options;
    countRead(this.counters, from);
    const container = from === 'nearest' ? this.nearest : this.writeRegion;
    try {
      const response = await container.item(id, id).read<CosmosItem>(priorityLevel(options));
      if (response.statusCode === 404 || !response.resource) throw notFound(routeSubject(id));
      return this.stored(response.resource, response.etag);
    } catch (error) {
      throw storeError(error, id);
    }
  }

  async create(doc: LocationDocument, options?: PriorityOption): Promise<StoredDocument> {
    this.counters.creates += 1;
    try {
      const response = await this.writeRegion.items.create<CosmosItem>(
        doc as CosmosItem,
        priorityLevel(options),
      );
      return this.written(response.resource ?? (doc as CosmosItem), response.etag);
    } catch (error) {
      throw storeError(error, doc.id);
    }
  }

  async replace(doc: LocationDocument, ifMatch: string, options?: PriorityOption): Promise<StoredDocument> {
    this.counters.replaces += 1;
    try {
      const response = await this.writeRegion.item(doc.id, doc.id).replace<CosmosItem>(doc as CosmosItem, {
        accessCondition: { type: 'IfMatch', condition: ifMatch },
        ...priorityLevel(options),
      });
      return this.written(response.resource ?? (doc as CosmosItem), response.etag);
    } catch (error) {
      throw storeError(error, doc.id);
    }
  }

  async delete(id: string, ifMatch: string, options?: PriorityOption): Promise<void> {
    this.counters.deletes += 1;
    try {
      await this.writeRegion
        .item(id, id)
        .delete({ accessCondition: { type: 'IfMatch', condition: ifMatch }, ...priorityLevel(options) });
    } catch (error) {
      throw storeError(error, id);
    }
  }

  /**
   * Pages in id order. The SDK's continuation token (JSON with `+`, `#`, `"`: easy to mangle in a query
   * string, and it names internal resource ids) travels base64url-wrapped; a token that does not
   * unwrap to itself is refused here, one Cosmos DB refuses is the caller's 400 all the same.
   */
  async list(options: ListOptions): Promise<ListPage> {
    const { lockedOnly, limit, continuation } = options;
    this.counters.lists += 1;
    const query = lockedOnly
      ? 'SELECT * FROM c WHERE IS_DEFINED(c.lock) AND NOT IS_NULL(c.lock) ORDER BY c.id'
      : 'SELECT * FROM c ORDER BY c.id';
    const token = continuation === undefined ? undefined : decodeContinuation(continuation);
    try {
      const page = await this.nearest.items
        .query<CosmosItem>(query, {
          maxItemCount: limit,
          ...(token ? { continuationToken: token } : {}),
          ...priorityLevel(options),
        })
        .fetchNext();
      return {
        items: page.resources.map((item) => this.stored(item, item._etag)),
        continuation: page.continuationToken ? encodeContinuation(page.continuationToken) : null,
      };
    } catch (error) {
      throw storeError(error, '(list)', { continuation });
    }
  }

  /**
   * By `_ts` (whole seconds, indexed by default), from the write region: the reconciliation compares the
   * authoritative versions with what the change feed (which reads them there) delivered. The SDK's
   * continuation travels wrapped as in `list`.
   */
  async listChanged({ since, until, limit, continuation }: ChangedListOptions): Promise<ListPage> {
    this.counters.lists += 1;
    const token = continuation === undefined ? undefined : decodeContinuation(continuation);
    try {
      const page = await this.writeRegion.items
        .query<CosmosItem & { _ts?: number }>(
          {
            query: 'SELECT * FROM c WHERE c._ts >= @since AND c._ts < @until ORDER BY c._ts',
            parameters: [
              { name: '@since', value: Math.floor(since / 1000) },
              { name: '@until', value: Math.floor(until / 1000) },
            ],
          },
          {
            maxItemCount: limit,
            ...(token ? { continuationToken: token } : {}),
            ...priorityLevel({ priority: 'low' }),
          },
        )
        .fetchNext();
      return {
        items: page.resources.map((item) => this.written(item, item._etag)),
        continuation: page.continuationToken ? encodeContinuation(page.continuationToken) : null,
      };
    } catch (error) {
      throw storeError(error, '(list)', { continuation });
    }
  }

  async close(): Promise<void> {
    this.nearestClient.dispose();
    this.writeClient.dispose();
  }

  /** The ETag exactly as Cosmos DB sent it: opaque, never unquoted (see ./common). */
  private stored(item: CosmosItem, etag: string | undefined): StoredDocument {
    const version = etag ?? item._etag;
    if (!version)
      throw new RouteLockError('StoreUnavailable', `Cosmos DB returned ${item.id} without an ETag.`);
    return { doc: withoutSystemFields(item) as LocationDocument, etag: version };
  }

  /** A write's result, with the service's own timestamp for the clock-skew check. */
  private written(item: CosmosItem & { _ts?: number }, etag: string | undefined): StoredDocument {
    const stored = this.stored(item, etag);
    return typeof item._ts === 'number' ? { ...stored, storedAt: item._ts * 1000 } : stored;
  }
}
