import type { ForceReleaseRequest } from '../../audit';

/**
 * The force-release requests port. Adapters: core/store/sqlite/forceRelease and
 * core/store/cosmos/forceRelease (beside the ledger, in container `audit`). The approval rules
 * are in core/forceRelease.
 */
export interface ForceReleaseRequests {
  /** AlreadyExists when a request with this id exists. */
  create(request: ForceReleaseRequest): Promise<void>;
  get(id: string): Promise<ForceReleaseRequest | null>;
  /** Saves `request` (its version incremented) only if the stored version is still `request.version`. */
  save(request: ForceReleaseRequest): Promise<ForceReleaseRequest>;
}
