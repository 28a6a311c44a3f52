import type { Actor } from '../core/audit';
import type { MigrationService } from '../migration/service';
import type { Router } from '../core/router';
import type { CampaignRecords } from './store/ports/campaigns';
import type { LocationStore } from '../core/store/ports/locations';
import type { MigrationRecords } from '../migration/store/ports/migrations';
import type { TelemetrySink } from '../migration/telemetry/sink';
import type { CampaignLimitsPatch, CampaignRequest, CampaignState, CampaignStatus } from './types';

/**
 * What the HTTP endpoints, the queue trigger and the command line use (docs/design.md §6.9), the same on both
 * runners: the implementation is `Campaigns` (shared/campaign/campaigns.ts); only the launcher differs.
 */
export interface CampaignService {
  /**
   * Create a campaign and launch its runner: 202 `created: true`. The same campaignId again with the
   * same target answers the campaign that stands (`created: false`); the same ids again are added again
   * while it is Running or Paused (kept once: a create that crashed before its members landed is
   * completed so), other ids are not (append with `addResources`); another target is 409 CampaignExists.
   */
  create(request: CampaignRequest, actor: Actor): Promise<CreatedCampaign>;
  status(campaignId: string): Promise<CampaignStatus>;
  list(query: CampaignListRequest): Promise<{ items: CampaignStatus[]; continuation?: string }>;
  /** Append up to 1,000 ids (one page); Running or Paused only (409 CampaignEnded otherwise). */
  addResources(campaignId: string, resourceIds: readonly string[], actor: Actor): Promise<AddedResources>;
  pause(campaignId: string, actor: Actor): Promise<CampaignStatus>;
  resume(campaignId: string, actor: Actor): Promise<CampaignStatus>;
  /** Cancel pending members and every running migration; Cancelling until those have ended. */
  cancel(campaignId: string, actor: Actor): Promise<CampaignStatus>;
  update(campaignId: string, patch: CampaignLimitsPatch, actor: Actor): Promise<CampaignStatus>;
}

export interface CreatedCampaign {
  campaignId: string;
  created: boolean;
  status: CampaignStatus;
}

export interface AddedResources {
  /** New members. */
  added: number;
  /** Ids already in the campaign (or twice in this request), kept once. */
  duplicates: number;
  status: CampaignStatus;
}

export interface CampaignListRequest {
  status?: CampaignState | undefined;
  limit?: number | undefined;
  continuation?: string | undefined;
}

/**
 * Who drives a campaign's ticks: the in-process loop (shared/campaign/inProcess.ts) or a Durable
 * orchestration (functions/durable/campaigns.ts). Both only call `campaignTick` until it says done.
 */
export interface CampaignLauncher {
  /** Make sure the campaign's runner is going (idempotent: a second launch of a running one does nothing). */
  launch(campaignId: string): Promise<void>;
  /** Tick soon: a pause, resume, cancel, new limits or new resources were saved. Best effort. */
  wake(campaignId: string): Promise<void>;
}

/** Timing of the ticks (ROUTELOCK_CAMPAIGN_TICK_SECONDS). */
export interface CampaignSettings {
  /** Between ticks while a campaign is Running, Paused or Cancelling. */
  tickMs: number;
}

/** What one tick reads and writes (`campaignTick` in shared/campaign/tick.ts). */
export interface TickDeps {
  campaigns: CampaignRecords;
  /** The ordinary start path (the claim, one migration per resource) and cancel. */
  migrations: MigrationService;
  /** A running member's end is read from its record (no task-hub read while it runs). */
  records: Pick<MigrationRecords, 'get'>;
  /** `from: {region}` selection pages through the routes here. */
  store: LocationStore;
  router: Router;
  now: () => number;
  settings: CampaignSettings;
  sink?: TelemetrySink;
}

export interface TickResult {
  /** True once the campaign has ended (Completed or Cancelled): the runner stops. */
  done: boolean;
  status: CampaignState;
  /** When to tick again (epoch ms), when not done. */
  nextTickAt: number;
}
