import { participantsFor } from './participants';
import type { Location, StoredDocument } from '../core/lock/document';
import type { LockSeed, TokenKeyring } from '../core/security/tokenKeys';
import { sealListedCopy } from './listedSeal';
import {
  type CutoverWindow,
  type MigrationInput,
  type MigrationSettings,
  type MigrationStatus,
  pendingStatus,
  WORKFLOW_VERSION,
} from './types';

/**
 * Migration records: migrationId → the instance that runs it, its input and its latest status. The
 * embedded host keeps them (and its runner's journal) in SQLite; in Azure they live in Cosmos DB
 * container `migrations`, next to the routes, so `GET /migrations/{id}` can find a migration's
 * instance and still answer after that instance id is reused by a later migration of the resource.
 * The port is migration/store/ports/migrations; the adapters are in migration/store/{sqlite,cosmos}/.
 */

export interface MigrationRecord {
  migrationId: string;
  instanceId: string;
  resourceId: string;
  target: Location;
  createdAt: string;
  /**
   * When this run of the migration claimed its resource: the start, or an operator's retry reopening it
   * (absent: `createdAt`). A claim younger than the start grace is never taken for a dead starter's.
   */
  claimedAt?: string;
  /** The campaign that started it (design §6.9); absent for a migration started on its own. */
  campaignId?: string;
  input: MigrationInput;
  status: MigrationStatus;
  /** True once the status is terminal. */
  done: boolean;
}

export function newMigrationRecord(
  input: MigrationInput,
  createdAt: string,
  campaignId?: string,
): MigrationRecord {
  return {
    migrationId: input.migrationId,
    instanceId: input.instanceId,
    resourceId: input.resourceId,
    target: input.target,
    createdAt,
    ...(campaignId === undefined ? {} : { campaignId }),
    input,
    status: pendingStatus(input),
    done: false,
  };
}

/**
 * A new migration's input, made by either starter. Everything a replay needs is captured here, so a
 * redeploy with other settings never changes a running migration: the settings, the participants whose
 * scope matches the resource (chosen once, design §6.5), the workflow version that runs it, and
 * the random lock seed (made by the starter, never in the orchestrator: its history holds the seed, never
 * a token).
 */
export function newMigrationInput(fields: {
  migrationId: string;
  instanceId: string;
  resourceId: string;
  target: Location;
  settings: MigrationSettings;
  lock: LockSeed;
  /** The cutover window (checked by the starter: migration/window). */
  window?: CutoverWindow | undefined;
  /**
   * A campaign's listed copy of the route (`MigrationRequest.listed`), sealed here with the starter's key
   * ring: the input goes through the task hub or the journal, which the pre-lock does not trust.
   */
  listed?: { copy: StoredDocument | undefined; keyring: TokenKeyring } | undefined;
}): MigrationInput {
  const { window, listed, ...rest } = fields;
  const { resourceId, migrationId, lock } = fields;
  const copy = listed?.copy;
  return {
    ...rest,
    ...(window === undefined ? {} : { window }),
    ...(listed === undefined || copy === undefined
      ? {}
      : {
          listed: copy,
          listedSeal: sealListedCopy(listed.keyring, { resourceId, migrationId, nonce: lock.nonce }, copy),
        }),
    settings: {
      ...fields.settings,
      participants: participantsFor(fields.resourceId, fields.settings.participants),
    },
    workflowVersion: WORKFLOW_VERSION,
  };
}

/**
 * Whether an orchestration's input is this record's current run: the same migration AND the same lock
 * seed. A retry reuses the migration id with a fresh seed, so the instance its first run left behind
 * (ended) is not the reopened record's run.
 */
export function runsRecord(input: MigrationInput | undefined, record: MigrationRecord): boolean {
  return (
    input?.migrationId === record.migrationId &&
    input.lock.keyId === record.input.lock.keyId &&
    input.lock.nonce === record.input.lock.nonce
  );
}

/** When the record's current run claimed the resource. */
export const claimedAtOf = (record: Pick<MigrationRecord, 'claimedAt' | 'createdAt'>): string =>
  record.claimedAt ?? record.createdAt;
