import type { Location } from '../lock/document';
import { type MigrationInput, type MigrationStatus, pendingStatus } from './types';

/**
 * Migration records: migrationId → the instance that runs it, its input and its latest status. The
 * embedded host keeps them (and its runner's journal) in SQLite; in Azure they live in Cosmos DB
 * container `migrations`, next to the routes, so `GET /migrations/{id}` can find a migration's
 * instance and still answer after that instance id is reused by a later migration of the resource.
 * The port is shared/store/ports/migrations.ts; the adapters are in shared/store/{sqlite,cosmos}/.
 */

export interface MigrationRecord {
  migrationId: string;
  instanceId: string;
  resourceId: string;
  target: Location;
  createdAt: string;
  input: MigrationInput;
  status: MigrationStatus;
  /** True once the status is terminal. */
  done: boolean;
}

export function newMigrationRecord(input: MigrationInput, createdAt: string): MigrationRecord {
  return {
    migrationId: input.migrationId,
    instanceId: input.instanceId,
    resourceId: input.resourceId,
    target: input.target,
    createdAt,
    input,
    status: pendingStatus(input),
    done: false,
  };
}
