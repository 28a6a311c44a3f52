import type { CampaignMember, CampaignRecord, CampaignState, MemberState } from '../../types';

/**
 * The campaigns port (design §6.9): a campaign record under ETag compare-and-swap, and one member row
 * per (campaignId, resourceId). Adapters: campaign/store/sqlite/campaigns (the embedded host) and
 * campaign/store/cosmos/campaigns (container `campaigns`, partition key /campaignId: a campaign and
 * its members share one logical partition). Failures are RouteLockErrors naming a campaign.
 */
export interface CampaignRecords {
  /** Create-only: `created: false` with the record that stands when the id exists. */
  create(record: CampaignRecord): Promise<{ created: boolean; record: VersionedCampaign }>;
  get(campaignId: string): Promise<VersionedCampaign | null>;
  /**
   * Replace the record only if its stored ETag is still `etag`: the new version, or null when it
   * changed meanwhile (re-read and decide again). NotFound when there is no record.
   */
  replace(record: CampaignRecord, etag: string): Promise<VersionedCampaign | null>;
  /** Campaigns, newest first (createdAt, then campaignId, descending), keyset-paged. */
  list(query: CampaignListQuery): Promise<CampaignPage>;
  /** Ids of campaigns whose status is one of these (the in-process runner resumes the unfinished). */
  idsInStates(states: readonly CampaignState[]): Promise<string[]>;
  /**
   * Add members (state `pending`) unless the campaign already has one for the resource: how many were
   * added; a resource listed twice (in this call or before) is kept once, at its first seq.
   */
  addMembers(
    campaignId: string,
    members: readonly (Pick<CampaignMember, 'seq' | 'resourceId'> & {
      listed?: CampaignMember['listed'] | undefined;
    })[],
  ): Promise<number>;
  /** Members in one state, in seq order, after `afterSeq` (exclusive) when given: at most `limit`. */
  members(
    campaignId: string,
    query: { state: MemberState; limit: number; afterSeq?: number },
  ): Promise<CampaignMember[]>;
  /** Upsert these members' fields (matched on campaignId + resourceId); NotFound for an unknown one. */
  saveMembers(campaignId: string, members: readonly CampaignMember[]): Promise<void>;
  /** How many members are in each state (a state with none is absent or 0). */
  countMembers(campaignId: string): Promise<Partial<Record<MemberState, number>>>;
}

export interface VersionedCampaign {
  record: CampaignRecord;
  etag: string;
}

export interface CampaignListQuery {
  status?: CampaignState | undefined;
  /** 1 to 1000. */
  limit: number;
  /** Opaque, from the previous page. */
  continuation?: string | undefined;
}

export interface CampaignPage {
  records: CampaignRecord[];
  /** Absent on the last page. */
  continuation?: string;
}
