import type { Container } from '@azure/cosmos';
import type { ForceReleaseRequest } from '../../audit';
import { changedSinceRead, forceReleaseRequestSubject } from '../errors';
import type { ForceReleaseRequests } from '../ports/forceRelease';
import { storeError, withoutSystemFields } from './common';

/**
 * Azure: force-release requests beside the ledger in container `audit`, kind "forceReleaseRequest". A
 * save checks the version it was given, then replaces on the ETag it read (passed back as received).
 */
export class CosmosForceReleaseRequests implements ForceReleaseRequests {
  constructor(private readonly container: Container) {}

  async create(request: ForceReleaseRequest): Promise<void> {
    try {
      await this.container.items.create(request);
    } catch (error) {
      throw storeError(error, forceReleaseRequestSubject(request.id, request.resourceId));
    }
  }

  async get(id: string): Promise<ForceReleaseRequest | null> {
    try {
      const { resource } = await this.container.item(id, id).read<ForceReleaseRequest>();
      return resource ? withoutSystemFields(resource) : null;
    } catch (error) {
      const mapped = storeError(error, forceReleaseRequestSubject(id));
      if (mapped.code === 'NotFound') return null;
      throw mapped;
    }
  }

  async save(request: ForceReleaseRequest): Promise<ForceReleaseRequest> {
    const subject = forceReleaseRequestSubject(request.id, request.resourceId);
    try {
      const { resource, etag } = await this.container
        .item(request.id, request.id)
        .read<ForceReleaseRequest>();
      if (!resource || resource.version !== request.version) throw changedSinceRead(subject);
      // An empty condition would make the replace unconditional: refuse rather than risk a lost update.
      if (!etag) throw storeError({ code: 'NoEtag' }, subject);
      const next = { ...request, version: request.version + 1 };
      await this.container
        .item(request.id, request.id)
        .replace(next, { accessCondition: { type: 'IfMatch', condition: etag } });
      return next;
    } catch (error) {
      throw storeError(error, subject);
    }
  }
}
