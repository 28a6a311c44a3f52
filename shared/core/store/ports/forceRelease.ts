import type { ForceReleaseRequest } from '../../audit';

/**
 * The force-release requests port. Adapters: shared/core/store/sqlite/forceRelease.ts and
 * shared/core/store/cosmos/forceRelease.ts (beside the ledger, in container `audit`). The approval rules
 * are in shared/core/forceRelease.ts.
 */
export interface ForceReleaseRequests {
  /** AlreadyExists when a request with this id exists. */
  create(request: ForceReleaseRequest): Promise<void>;
  get(id: string): Promise<ForceReleaseRequest | null>;
  /** Saves `request` (its version incremented) only if the stored version is still `request.version`. */
  save(request: ForceReleaseRequest): Promise<ForceReleaseRequest>;
}
