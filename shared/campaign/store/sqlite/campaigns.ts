import { randomUUID } from 'node:crypto';
import type { CampaignMember, CampaignRecord, CampaignState, MemberState } from '../../types';
import { decodeNewestFirstCursor, encodeNewestFirstCursor } from '../../../core/store/continuation';
import { campaignMemberSubject, campaignSubject, notFound } from '../../../core/store/errors';
import type { CampaignListQuery, CampaignPage, CampaignRecords, VersionedCampaign } from '../ports/campaigns';
import { guarded } from '../../../core/store/sqlite/errors';
import { SqliteTables } from '../../../core/store/sqlite/open';

type Value = string | number;

/** The list's statement: the status filter, the keyset after the previous page, newest first. */
function listStatement(query: CampaignListQuery): { sql: string; values: Value[] } {
  const where: string[] = [];
  const values: Value[] = [];
  if (query.status !== undefined) {
    where.push('status = ?');
    values.push(query.status);
  }
  if (query.continuation !== undefined) {
    const after = decodeNewestFirstCursor(query.continuation);
    where.push('(created_at, campaign_id) < (?, ?)');
    values.push(after.createdAt, after.id);
  }
  values.push(query.limit + 1);
  const filter = where.length > 0 ? `WHERE ${where.join(' AND ')} ` : '';
  return {
    sql: `SELECT record, etag FROM campaigns ${filter}ORDER BY created_at DESC, campaign_id DESC LIMIT ?`,
    values,
  };
}

interface CampaignRow {
  record: string;
  etag: string;
}

const versioned = (row: CampaignRow): VersionedCampaign => ({
  record: JSON.parse(row.record) as CampaignRecord,
  etag: row.etag,
});

/**
 * The embedded host's campaigns (docs/design.md §6.9), tables `campaigns` (one row per campaign, under an
 * ETag that every write replaces with a fresh random one) and `campaign_members` (one row per campaign and
 * resource: the primary key is what keeps a resource listed twice to one member).
 */
export class SqliteCampaignRecords extends SqliteTables implements CampaignRecords {
  private readonly statements;

  constructor(path: string) {
    super(
      path,
      `
      CREATE TABLE IF NOT EXISTS campaigns (
        campaign_id TEXT PRIMARY KEY,
        record TEXT NOT NULL,
        etag TEXT NOT NULL,
        created_at TEXT NOT NULL,
        status TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS campaigns_newest ON campaigns (created_at, campaign_id);
      CREATE INDEX IF NOT EXISTS campaigns_status_newest ON campaigns (status, created_at, campaign_id);
      CREATE TABLE IF NOT EXISTS campaign_members (
        campaign_id TEXT NOT NULL,
        resource_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (campaign_id, resource_id)
      );
      CREATE INDEX IF NOT EXISTS campaign_members_state_seq ON campaign_members (campaign_id, state, seq);
    `,
    );
    this.statements = {
      insert: this.db.prepare<[string, string, string, string, string]>(
        `INSERT INTO campaigns (campaign_id, record, etag, created_at, status)
         VALUES (?, ?, ?, ?, ?) ON CONFLICT (campaign_id) DO NOTHING`,
      ),
      get: this.db.prepare<[string], CampaignRow>('SELECT record, etag FROM campaigns WHERE campaign_id = ?'),
      replace: this.db.prepare<[string, string, string, string, string]>(
        'UPDATE campaigns SET record = ?, etag = ?, status = ? WHERE campaign_id = ? AND etag = ?',
      ),
      exists: this.db.prepare<[string], { found: number }>(
        'SELECT 1 AS found FROM campaigns WHERE campaign_id = ?',
      ),
      addMember: this.db.prepare<[string, string, number, string]>(
        `INSERT OR IGNORE INTO campaign_members (campaign_id, resource_id, seq, state, record)
         VALUES (?, ?, ?, 'pending', ?)`,
      ),
      members: this.db.prepare<[string, string, number, number], { record: string }>(
        `SELECT record FROM campaign_members WHERE campaign_id = ? AND state = ? AND seq > ?
         ORDER BY seq LIMIT ?`,
      ),
      saveMember: this.db.prepare<[number, string, string, string, string]>(
        'UPDATE campaign_members SET seq = ?, state = ?, record = ? WHERE campaign_id = ? AND resource_id = ?',
      ),
      count: this.db.prepare<[string], { state: MemberState; n: number }>(
        'SELECT state, COUNT(*) AS n FROM campaign_members WHERE campaign_id = ? GROUP BY state',
      ),
    };
  }

  async create(record: CampaignRecord): Promise<{ created: boolean; record: VersionedCampaign }> {
    return guarded(campaignSubject(record.campaignId), () =>
      this.db
        .transaction(() => {
          const etag = randomUUID();
          const { changes } = this.statements.insert.run(
            record.campaignId,
            JSON.stringify(record),
            etag,
            record.createdAt,
            record.status,
          );
          if (changes === 1) return { created: true, record: { record, etag } };
          return { created: false, record: this.getSync(record.campaignId) ?? { record, etag } };
        })
        .immediate(),
    );
  }

  async get(campaignId: string): Promise<VersionedCampaign | null> {
    return guarded(campaignSubject(campaignId), () => this.getSync(campaignId));
  }

  private getSync(campaignId: string): VersionedCampaign | null {
    const row = this.statements.get.get(campaignId);
    return row ? versioned(row) : null;
  }

  async replace(record: CampaignRecord, etag: string): Promise<VersionedCampaign | null> {
    const subject = campaignSubject(record.campaignId);
    return guarded(subject, () => {
      const next = randomUUID();
      const { changes } = this.statements.replace.run(
        JSON.stringify(record),
        next,
        record.status,
        record.campaignId,
        etag,
      );
      if (changes === 1) return { record, etag: next };
      if (!this.statements.exists.get(record.campaignId)) throw notFound(subject);
      return null;
    });
  }

  async list(query: CampaignListQuery): Promise<CampaignPage> {
    const { sql, values } = listStatement(query);
    return guarded(campaignSubject('(list)'), () => {
      const rows = this.db.prepare<Value[], CampaignRow>(sql).all(...values);
      const records = rows.slice(0, query.limit).map((row) => versioned(row).record);
      const last = records.at(-1);
      return rows.length > query.limit && last
        ? { records, continuation: encodeNewestFirstCursor(last.createdAt, last.campaignId) }
        : { records };
    });
  }

  async idsInStates(states: readonly CampaignState[]): Promise<string[]> {
    if (states.length === 0) return [];
    return guarded(campaignSubject('(list)'), () =>
      this.db
        .prepare<string[], { campaign_id: string }>(
          `SELECT campaign_id FROM campaigns WHERE status IN (${states.map(() => '?').join(', ')})
           ORDER BY created_at, campaign_id`,
        )
        .all(...states)
        .map((row) => row.campaign_id),
    );
  }

  async addMembers(
    campaignId: string,
    members: readonly (Pick<CampaignMember, 'seq' | 'resourceId'> & {
      listed?: CampaignMember['listed'] | undefined;
    })[],
  ): Promise<number> {
    const subject = campaignSubject(campaignId);
    return guarded(subject, () =>
      this.db
        .transaction(() => {
          if (!this.statements.exists.get(campaignId)) throw notFound(subject);
          let added = 0;
          for (const { seq, resourceId, listed } of members) {
            const member: CampaignMember = {
              campaignId,
              seq,
              resourceId,
              state: 'pending',
              ...(listed === undefined ? {} : { listed }),
            };
            added += this.statements.addMember.run(
              campaignId,
              resourceId,
              seq,
              JSON.stringify(member),
            ).changes;
          }
          return added;
        })
        .immediate(),
    );
  }

  async members(
    campaignId: string,
    query: { state: MemberState; limit: number; afterSeq?: number },
  ): Promise<CampaignMember[]> {
    return guarded(campaignSubject(campaignId), () =>
      this.statements.members
        .all(campaignId, query.state, query.afterSeq ?? Number.MIN_SAFE_INTEGER, query.limit)
        .map((row) => JSON.parse(row.record) as CampaignMember),
    );
  }

  async saveMembers(campaignId: string, members: readonly CampaignMember[]): Promise<void> {
    guarded(campaignSubject(campaignId), () =>
      this.db
        .transaction(() => {
          for (const member of members) {
            const stored = { ...member, campaignId };
            const { changes } = this.statements.saveMember.run(
              member.seq,
              member.state,
              JSON.stringify(stored),
              campaignId,
              member.resourceId,
            );
            // all or nothing: the transaction rolls back the members saved before the unknown one
            if (changes === 0) throw notFound(campaignMemberSubject(campaignId, member.resourceId));
          }
        })
        .immediate(),
    );
  }

  async countMembers(campaignId: string): Promise<Partial<Record<MemberState, number>>> {
    return guarded(campaignSubject(campaignId), () =>
      Object.fromEntries(this.statements.count.all(campaignId).map((row) => [row.state, row.n])),
    );
  }
}
