import type { ForceReleaseRequest } from '../../audit';

/**
 * The force-release requests port. Adapters: shared/store/sqlite/forceRelease.ts and
 * shared/store/cosmos/forceRelease.ts (beside the ledger, in container `audit`). The approval rules
 * are in shared/forceRelease.ts.
 */
export interface ForceReleaseRequests {
  /** AlreadyExists when a request with this id exists. */
  create(request: ForceReleaseRequest): Promise<void>;
  get(id: string): Promise<ForceReleaseRequest | null>;
  /** Saves `request` (its version incremented) only if the stored version is still `request.version`. */
  save(request: ForceReleaseRequest): Promise<ForceReleaseRequest>;
}
