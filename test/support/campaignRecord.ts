import { countsFrom } from '../../shared/campaign/plan';
import type { CampaignRecord } from '../../shared/campaign/types';

/** A fresh campaign record (no pages read, no members yet) as the stores keep it; `over` sets any field. */
export function campaignRecord(campaignId: string, over: Partial<CampaignRecord> = {}): CampaignRecord {
  const createdAt = over.createdAt ?? '2026-01-01T00:00:00.000Z';
  return {
    campaignId,
    target: { region: 'eastus' },
    limits: { maxConcurrent: 10 },
    status: 'Running',
    source: { kind: 'ids' },
    createdAt,
    updatedAt: createdAt,
    createdBy: 'oid-alice',
    pages: 0,
    reserved: 0,
    counts: countsFrom({}),
    recentStarts: [],
    writeLockHistogram: [],
    ...over,
  };
}
