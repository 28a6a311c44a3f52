import type { Container } from '@azure/cosmos';
import { isRouteLockError } from '../../../core/errors';
import { type SeenVersions, mergeSeenKeys } from '../../telemetry/seen';
import { telemetryRecordSubject } from '../../../core/store/errors';
import { storeError } from '../../../core/store/cosmos/common';

/**
 * Azure: what the change handler saw, beside the ledger in container `audit` (partition key `/id`), one
 * item per resource, kind "telemetrySeen", its keys bounded (SEEN_KEYS_PER_RESOURCE): the container grows
 * with the resources, not with their versions. A record is a read and a conditional replace (or a
 * create); the change feed hands a partition's versions to one invocation at a time, so a lost race
 * (409, 412) is rare and simply tried again.
 */
interface SeenItem {
  id: string;
  kind: 'telemetrySeen';
  resourceId: string;
  keys: string[];
}

const seenItemId = (resourceId: string) => `telemetrySeen|${resourceId}`;

export class CosmosSeenVersions implements SeenVersions {
  constructor(private readonly container: Container) {}

  async record(resourceId: string, keys: readonly string[]): Promise<void> {
    const id = seenItemId(resourceId);
    const subject = telemetryRecordSubject(id, resourceId);
    for (let attempt = 1; ; attempt += 1) {
      try {
        const current = await this.read(id);
        const item: SeenItem = {
          id,
          kind: 'telemetrySeen',
          resourceId,
          keys: mergeSeenKeys(current?.item.keys ?? [], keys),
        };
        if (!current) await this.container.items.create(item);
        else
          await this.container
            .item(id, id)
            .replace(item, { accessCondition: { type: 'IfMatch', condition: current.etag } });
        return;
      } catch (error) {
        const failure = storeError(error, subject);
        const lostRace =
          isRouteLockError(failure, 'AlreadyExists') || isRouteLockError(failure, 'PreconditionFailed');
        if (!lostRace || attempt >= 3) throw failure;
      }
    }
  }

  /** Point reads (1 RU each), a page of the reconciliation's at a time. */
  async seen(resourceIds: readonly string[]): Promise<Set<string>> {
    const items = await Promise.all(
      resourceIds.map(async (resourceId) => {
        try {
          return (await this.read(seenItemId(resourceId)))?.item.keys ?? [];
        } catch (error) {
          throw storeError(error, telemetryRecordSubject(seenItemId(resourceId), resourceId));
        }
      }),
    );
    return new Set(items.flat());
  }

  private async read(id: string): Promise<{ item: SeenItem; etag: string } | null> {
    try {
      const response = await this.container.item(id, id).read<SeenItem>();
      if (response.statusCode === 404 || !response.resource) return null;
      return { item: response.resource, etag: response.etag ?? response.resource._etag };
    } catch (error) {
      if ((error as { code?: unknown }).code === 404) return null;
      throw error;
    }
  }
}
