import type { Container, IndexingPolicy, JSONObject, OperationInput, SqlParameter } from '@azure/cosmos';
import {
  type CampaignMember,
  type CampaignRecord,
  type CampaignState,
  type MemberState,
  memberStates,
} from '../../types';
import { boundedId } from '../../../migration/instanceId';
import { decodeNewestFirstCursor, encodeNewestFirstCursor } from '../../../core/store/continuation';
import {
  type StoreSubject,
  campaignMemberSubject,
  campaignSubject,
  notFound,
} from '../../../core/store/errors';
import type { CampaignListQuery, CampaignPage, CampaignRecords, VersionedCampaign } from '../ports/campaigns';
import { newestFirstPage, storeError, withoutSystemFields } from '../../../core/store/cosmos/common';

/** The campaign item's id in its partition (its members' ids all start `m~`, so none is this). */
export const campaignItemId = 'campaign';

/**
 * A member's item id: `m~` and its resource id with every character outside the resource-id alphabet
 * (Cosmos DB ids may not hold / \ ? #) written %XX, so distinct resources never share an id; hashed
 * past Cosmos DB's 255 characters as the claim ids are (an escaped id holds no `~`).
 */
export function memberItemId(resourceId: string): string {
  const escaped = Array.from(Buffer.from(resourceId, 'utf8'))
    .map((byte) => {
      const char = String.fromCharCode(byte);
      return /[A-Za-z0-9._:@-]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    })
    .join('');
  return boundedId('m~', escaped, 255);
}

/**
 * Container `campaigns`' indexing policy: the default plus two composite indexes. The list's `ORDER BY
 * c.createdAt DESC, c.campaignId DESC` needs one on Cosmos DB. members() filters on equality of
 * campaignId, kind and state, and ranges over and sorts by seq: Cosmos DB serves a filter + ORDER BY
 * from a composite index only when the ORDER BY names the equality-filtered properties first, in the
 * index's order, and the range-filtered one last; without it, a campaign's few pending members are
 * found by reading its members in seq order. Bicep deploys exactly this (infra/bicep/modules/cosmos.bicep);
 * a key-authenticated emulator gets it when the container is created.
 */
export const campaignsIndexingPolicy: IndexingPolicy = {
  indexingMode: 'consistent',
  automatic: true,
  includedPaths: [{ path: '/*' }],
  excludedPaths: [{ path: '/"_etag"/?' }],
  compositeIndexes: [
    [
      { path: '/createdAt', order: 'descending' },
      { path: '/campaignId', order: 'descending' },
    ],
    [
      { path: '/campaignId', order: 'ascending' },
      { path: '/kind', order: 'ascending' },
      { path: '/state', order: 'ascending' },
      { path: '/seq', order: 'ascending' },
    ],
  ],
};

/** Its partition key: a campaign and its members share one logical partition. */
export const campaignsPartitionKey = '/campaignId';

/** At most this many operations in one bulk request (the service's limit). */
const bulkChunk = 100;
/** At most this many single writes at once, where a bulk operation has to be retried on its own. */
const parallelWrites = 16;

type CampaignItem = CampaignRecord & { id: string; kind: 'campaign' };
type MemberItem = CampaignMember & { id: string; kind: 'member' };
/** Bulk's bodies are JSON objects; an item is one. */
const asJson = (item: MemberItem): JSONObject => item as unknown as JSONObject;

const campaignItem = (record: CampaignRecord): CampaignItem => ({
  ...record,
  id: campaignItemId,
  kind: 'campaign',
});
const memberItem = (member: CampaignMember): MemberItem => ({
  ...member,
  id: memberItemId(member.resourceId),
  kind: 'member',
});

function recordOf(item: Record<string, unknown>): CampaignRecord {
  const { id: _id, kind: _kind, ...record } = withoutSystemFields(item);
  return record as unknown as CampaignRecord;
}

function memberOf(item: Record<string, unknown>): CampaignMember {
  const { id: _id, kind: _kind, ...member } = withoutSystemFields(item);
  return member as unknown as CampaignMember;
}

/** The version of a write or read: the ETag header, else the item's own `_etag` (opaque either way). */
function versionOf(
  response: { etag?: string; resource?: { _etag?: unknown } | undefined },
  subject: StoreSubject,
): string {
  const own = response.resource?._etag;
  const etag = response.etag ?? (typeof own === 'string' ? own : undefined);
  // Without it the next replace could only be unconditional: refuse rather than risk a lost update.
  if (!etag) throw storeError({ code: 'NoEtag' }, subject);
  return etag;
}

/**
 * Azure: campaigns in Cosmos DB container `campaigns` (partition key /campaignId, created by Bicep):
 * per campaign an item `campaign` (the record, replaced only on the ETag read) and an item per member,
 * whose id derives from its resource id, so a member added twice is a 409, never a second member.
 */
export class CosmosCampaignRecords implements CampaignRecords {
  constructor(private readonly container: Container) {}

  async create(record: CampaignRecord): Promise<{ created: boolean; record: VersionedCampaign }> {
    const subject = campaignSubject(record.campaignId);
    try {
      const response = await this.container.items.create(campaignItem(record));
      return { created: true, record: { record, etag: versionOf(response, subject) } };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code !== 'AlreadyExists') throw mapped;
    }
    const standing = await this.get(record.campaignId);
    // deleted between the 409 and the read: nothing in this store deletes one
    if (!standing) throw notFound(subject);
    return { created: false, record: standing };
  }

  async get(campaignId: string): Promise<VersionedCampaign | null> {
    const subject = campaignSubject(campaignId);
    try {
      const response = await this.container.item(campaignItemId, campaignId).read<Record<string, unknown>>();
      if (!response.resource) return null;
      return { record: recordOf(response.resource), etag: versionOf(response, subject) };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }

  async replace(record: CampaignRecord, etag: string): Promise<VersionedCampaign | null> {
    const subject = campaignSubject(record.campaignId);
    try {
      const response = await this.container
        .item(campaignItemId, record.campaignId)
        .replace(campaignItem(record), { accessCondition: { type: 'IfMatch', condition: etag } });
      return { record, etag: versionOf(response, subject) };
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code === 'PreconditionFailed') return null;
      throw mapped;
    }
  }

  /**
   * A page, newest first, across partitions: `TOP limit + 1` campaign items after the cursor (our own
   * position, the last record's sort key, not the SDK's cross-partition token).
   */
  async list(query: CampaignListQuery): Promise<CampaignPage> {
    const where = ["c.kind = 'campaign'"];
    const parameters: SqlParameter[] = [];
    if (query.status !== undefined) {
      where.push('c.status = @status');
      parameters.push({ name: '@status', value: query.status });
    }
    const after = query.continuation === undefined ? undefined : decodeNewestFirstCursor(query.continuation);
    try {
      const page = await newestFirstPage(this.container, {
        where,
        parameters,
        idField: 'campaignId',
        after,
        limit: query.limit,
      });
      const records = page.items.map(recordOf);
      const last = records.at(-1);
      return page.more && last
        ? { records, continuation: encodeNewestFirstCursor(last.createdAt, last.campaignId) }
        : { records };
    } catch (error) {
      throw storeError(error, campaignSubject('(list)'));
    }
  }

  async idsInStates(states: readonly CampaignState[]): Promise<string[]> {
    if (states.length === 0) return [];
    const names = states.map((_, i) => `@state${i}`);
    try {
      const { resources } = await this.container.items
        .query<string>({
          query: `SELECT VALUE c.campaignId FROM c WHERE c.kind = 'campaign' AND c.status IN (${names.join(', ')})`,
          parameters: states.map((state, i) => ({ name: `@state${i}`, value: state })),
        })
        .fetchAll();
      return resources;
    } catch (error) {
      throw storeError(error, campaignSubject('(list)'));
    }
  }

  /**
   * Create-only member items, in bulk requests of up to 100 (one round trip each; the partition's
   * operations run in order): a 409 is a resource already in the campaign. A resource listed twice in
   * one call is dropped here first, so its first seq is the one kept whatever the service's order.
   */
  async addMembers(
    campaignId: string,
    members: readonly (Pick<CampaignMember, 'seq' | 'resourceId'> & {
      listed?: CampaignMember['listed'] | undefined;
    })[],
  ): Promise<number> {
    const subject = campaignSubject(campaignId);
    if (!(await this.get(campaignId))) throw notFound(subject);
    const firsts = new Map<string, CampaignMember>();
    for (const { seq, resourceId, listed } of members) {
      if (!firsts.has(resourceId))
        firsts.set(resourceId, {
          campaignId,
          seq,
          resourceId,
          state: 'pending',
          ...(listed === undefined ? {} : { listed }),
        });
    }
    const statuses = await this.writeMembers(
      [...firsts.values()].map((member) => ({
        operationType: 'Create',
        partitionKey: campaignId,
        resourceBody: asJson(memberItem(member)),
      })),
      subject,
    );
    return statuses.filter((status) => status === 201).length;
  }

  /**
   * The partition key option scopes it on Cosmos DB; the filter on campaignId too on the stand-in, which
   * ignores it. The equality-filtered properties lead the ORDER BY (constant within the result, so the
   * order is seq's) so the members composite index serves it (campaignsIndexingPolicy).
   */
  async members(
    campaignId: string,
    query: { state: MemberState; limit: number; afterSeq?: number },
  ): Promise<CampaignMember[]> {
    const parameters: SqlParameter[] = [
      { name: '@top', value: query.limit },
      { name: '@state', value: query.state },
      { name: '@campaignId', value: campaignId },
    ];
    let after = '';
    if (query.afterSeq !== undefined) {
      after = ' AND c.seq > @afterSeq';
      parameters.push({ name: '@afterSeq', value: query.afterSeq });
    }
    try {
      const { resources } = await this.container.items
        .query<Record<string, unknown>>(
          {
            query: `SELECT TOP @top * FROM c WHERE c.campaignId = @campaignId AND c.kind = 'member' AND c.state = @state${after} ORDER BY c.campaignId, c.kind, c.state, c.seq`,
            parameters,
          },
          { partitionKey: campaignId },
        )
        .fetchAll();
      return resources.map(memberOf);
    } catch (error) {
      throw storeError(error, campaignSubject(campaignId));
    }
  }

  /** Replace each member's item (bulk, as addMembers); one not there is NotFound, the others still saved. */
  async saveMembers(campaignId: string, members: readonly CampaignMember[]): Promise<void> {
    const statuses = await this.writeMembers(
      members.map((member) => ({
        operationType: 'Replace',
        partitionKey: campaignId,
        id: memberItemId(member.resourceId),
        resourceBody: asJson(memberItem({ ...member, campaignId })),
      })),
      campaignSubject(campaignId),
    );
    const missing = statuses.findIndex((status) => status === 404);
    if (missing >= 0) throw notFound(campaignMemberSubject(campaignId, members[missing]!.resourceId));
  }

  /**
   * One COUNT per state in the campaign's partition only, at once: each is answered from the index on its
   * equality filters. Not one `GROUP BY c.state` (Cosmos DB has it) because the stand-in's query engine
   * cannot parse GROUP BY, and a query no test runs is not shipped.
   */
  async countMembers(campaignId: string): Promise<Partial<Record<MemberState, number>>> {
    try {
      const counts = await Promise.all(
        memberStates.map(async (state) => {
          const { resources } = await this.container.items
            .query<number>(
              {
                query:
                  "SELECT VALUE COUNT(1) FROM c WHERE c.campaignId = @campaignId AND c.kind = 'member' AND c.state = @state",
                parameters: [
                  { name: '@campaignId', value: campaignId },
                  { name: '@state', value: state },
                ],
              },
              { partitionKey: campaignId },
            )
            .fetchAll();
          return [state, resources[0] ?? 0] as const;
        }),
      );
      return Object.fromEntries(counts.filter(([, n]) => n > 0));
    } catch (error) {
      throw storeError(error, campaignSubject(campaignId));
    }
  }

  /**
   * Run create or replace operations: each one's outcome, 201/200 done, 409 (create) already there,
   * 404 (replace) not there. The deprecated `bulk` sends a chunk at once; executeBulkOperations held a
   * partial batch about 1 s (measured on the stand-in). An operation bulk did not settle (a 429, a
   * timeout) is sent again on its own, through the SDK's retry policy, at most 16 at once.
   */
  private async writeMembers(operations: OperationInput[], subject: StoreSubject): Promise<number[]> {
    const statuses: number[] = [];
    for (let start = 0; start < operations.length; start += bulkChunk) {
      const chunk = operations.slice(start, start + bulkChunk);
      let responses: { statusCode: number }[];
      try {
        responses = await this.container.items.bulk(chunk, { continueOnError: true });
      } catch (error) {
        throw storeError(error, subject);
      }
      const settled = chunk.map((_, i) => responses[i]?.statusCode ?? 0);
      const again = settled.flatMap((status, i) => (isFinal(status) ? [] : [i]));
      for (let from = 0; from < again.length; from += parallelWrites) {
        await Promise.all(
          again.slice(from, from + parallelWrites).map(async (i) => {
            settled[i] = await this.writeOne(chunk[i]!, subject);
          }),
        );
      }
      statuses.push(...settled);
    }
    return statuses;
  }

  private async writeOne(operation: OperationInput, subject: StoreSubject): Promise<number> {
    const body = (operation as unknown as { resourceBody: MemberItem }).resourceBody;
    try {
      if (operation.operationType === 'Create') {
        await this.container.items.create(body);
        return 201;
      }
      await this.container.item(body.id, body.campaignId).replace(body);
      return 200;
    } catch (error) {
      const mapped = storeError(error, subject);
      if (mapped.code === 'AlreadyExists') return 409;
      if (mapped.code === 'NotFound') return 404;
      throw mapped;
    }
  }
}

/** An outcome bulk settled: written, or refused for good (already there, not there). */
function isFinal(status: number): boolean {
  return status === 200 || status === 201 || status === 409 || status === 404;
}
