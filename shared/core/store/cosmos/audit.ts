import type { Container } from '@azure/cosmos';
import type { AuditRecord } from '../../audit';
import { isRouteLockError } from '../../errors';
import { auditEntrySubject } from '../errors';
import type { AuditLedger } from '../ports/audit';
import { storeError, withoutSystemFields } from './common';

/** Azure: the ledger in container `audit` (partition key `/id`, created by Bicep), kind "audit". */
export class CosmosAuditLedger implements AuditLedger {
  constructor(private readonly container: Container) {}

  /** A create, not an upsert: the first append of an id wins (append-only); a 409 is that id kept already. */
  async append(record: AuditRecord): Promise<void> {
    try {
      await this.container.items.create(record);
    } catch (error) {
      const failure = storeError(error, auditEntrySubject(record.id, record.resourceId));
      if (isRouteLockError(failure, 'AlreadyExists')) return;
      throw failure;
    }
  }

  async list(resourceId: string, limit: number): Promise<AuditRecord[]> {
    try {
      const { resources } = await this.container.items
        .query<AuditRecord>(
          {
            query: "SELECT * FROM c WHERE c.kind = 'audit' AND c.resourceId = @resourceId ORDER BY c.at",
            parameters: [{ name: '@resourceId', value: resourceId }],
          },
          { maxItemCount: limit },
        )
        .fetchNext();
      return resources.slice(0, limit).map(withoutSystemFields);
    } catch (error) {
      throw storeError(error, auditEntrySubject('(list)', resourceId));
    }
  }
}
