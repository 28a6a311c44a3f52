import { telemetryRecordSubject } from '../../../core/store/errors';
import { type SeenVersions, mergeSeenKeys } from '../../telemetry/seen';
import {
  type ProbeCounts,
  type RecordedEvent,
  type RecorderJournal,
  type RecorderLimits,
  type RecorderState,
  recorderLimits,
} from '../../telemetry/sink';
import { guarded } from '../../../core/store/sqlite/errors';
import { SqliteTables } from '../../../core/store/sqlite/open';

/**
 * The embedded host's telemetry state, beside its migrations and ledger in the same SQLite file: the
 * journal of the recorder behind GET /api/metrics (so it survives a restart) and the versions the change
 * handler saw (for the reconciliation). Each counted event is one transaction: its key, its counts and
 * its values together, trimmed to the recorder's windows.
 */
export class SqliteTelemetry extends SqliteTables implements RecorderJournal, SeenVersions {
  private readonly statements;
  /** Each distribution's newest ordinal in the file (a failed transaction leaves it where it was). */
  private readonly lastOrdinal = new Map<string, number>();
  private readonly recordInTransaction: (event: RecordedEvent, ordinals: Map<string, number>) => void;
  private readonly recordSeenInTransaction: (resourceId: string, keys: readonly string[]) => void;

  constructor(
    path: string,
    private readonly limits: RecorderLimits = recorderLimits,
  ) {
    super(
      path,
      `
      CREATE TABLE IF NOT EXISTS telemetry_keys (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE);
      CREATE TABLE IF NOT EXISTS telemetry_counts (name TEXT PRIMARY KEY, count INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS telemetry_values (
        name TEXT NOT NULL, n INTEGER NOT NULL, value REAL NOT NULL, PRIMARY KEY (name, n)
      );
      CREATE TABLE IF NOT EXISTS telemetry_probes (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS telemetry_seen (resource_id TEXT PRIMARY KEY, keys TEXT NOT NULL);
    `,
    );
    const db = this.db;
    this.statements = {
      keys: db.prepare<[], { key: string }>('SELECT key FROM telemetry_keys ORDER BY seq'),
      counts: db.prepare<[], { name: string; count: number }>('SELECT name, count FROM telemetry_counts'),
      values: db.prepare<[], { name: string; value: number }>(
        'SELECT name, value FROM telemetry_values ORDER BY name, n',
      ),
      lastOrdinals: db.prepare<[], { name: string; n: number }>(
        'SELECT name, MAX(n) AS n FROM telemetry_values GROUP BY name',
      ),
      probes: db.prepare<[], { state: string }>('SELECT state FROM telemetry_probes WHERE id = 1'),
      addKey: db.prepare<[string]>(
        'INSERT INTO telemetry_keys (key) VALUES (?) ON CONFLICT (key) DO NOTHING',
      ),
      trimKeys: db.prepare<[number]>(
        'DELETE FROM telemetry_keys WHERE seq <= (SELECT MAX(seq) FROM telemetry_keys) - ?',
      ),
      bump: db.prepare<[string]>(
        'INSERT INTO telemetry_counts (name, count) VALUES (?, 1) ON CONFLICT (name) DO UPDATE SET count = count + 1',
      ),
      addValue: db.prepare<[string, number, number]>(
        'INSERT INTO telemetry_values (name, n, value) VALUES (?, ?, ?)',
      ),
      // Ordinals are contiguous per name: the window is the last `keep` of them, a range on the key.
      trimValues: db.prepare<[string, number]>('DELETE FROM telemetry_values WHERE name = ? AND n <= ?'),
      saveProbes: db.prepare<[string]>(
        'INSERT INTO telemetry_probes (id, state) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state',
      ),
      seenOf: db.prepare<[string], { keys: string }>('SELECT keys FROM telemetry_seen WHERE resource_id = ?'),
      saveSeen: db.prepare<[string, string]>(
        'INSERT INTO telemetry_seen (resource_id, keys) VALUES (?, ?) ON CONFLICT (resource_id) DO UPDATE SET keys = excluded.keys',
      ),
    };
    for (const { name, n } of this.statements.lastOrdinals.all()) this.lastOrdinal.set(name, n);
    this.recordInTransaction = db.transaction((event: RecordedEvent, ordinals: Map<string, number>) => {
      if (event.key !== undefined) {
        this.statements.addKey.run(event.key);
        this.statements.trimKeys.run(this.limits.keys);
      }
      for (const name of event.counts) this.statements.bump.run(name);
      for (const { name, value } of event.values) {
        const n = (ordinals.get(name) ?? this.lastOrdinal.get(name) ?? 0) + 1;
        this.statements.addValue.run(name, n, value);
        this.statements.trimValues.run(name, n - this.limits.values);
        ordinals.set(name, n);
      }
    });
    this.recordSeenInTransaction = db.transaction((resourceId: string, keys: readonly string[]) => {
      const row = this.statements.seenOf.get(resourceId);
      const existing = row ? (JSON.parse(row.keys) as string[]) : [];
      this.statements.saveSeen.run(resourceId, JSON.stringify(mergeSeenKeys(existing, keys)));
    });
  }

  load(): RecorderState {
    return guarded(telemetryRecordSubject('(recorder)'), () => {
      const values: Record<string, number[]> = {};
      for (const { name, value } of this.statements.values.all()) (values[name] ??= []).push(value);
      const probes = this.statements.probes.get();
      return {
        keys: this.statements.keys.all().map((row) => row.key),
        counts: Object.fromEntries(this.statements.counts.all().map((row) => [row.name, row.count])),
        values,
        probes: probes ? (JSON.parse(probes.state) as ProbeCounts) : { runs: 0, failures: 0, last: null },
      };
    });
  }

  recordEvent(event: RecordedEvent): void {
    const ordinals = new Map<string, number>();
    guarded(telemetryRecordSubject('(recorder)'), () => this.recordInTransaction(event, ordinals));
    // only once committed: a rolled-back event takes no ordinal
    for (const [name, n] of ordinals) this.lastOrdinal.set(name, n);
  }

  recordDuplicate(): void {
    guarded(telemetryRecordSubject('(recorder)'), () => this.statements.bump.run('duplicates'));
  }

  recordProbes(probes: ProbeCounts): void {
    guarded(telemetryRecordSubject('(recorder)'), () =>
      this.statements.saveProbes.run(JSON.stringify(probes)),
    );
  }

  async record(resourceId: string, keys: readonly string[]): Promise<void> {
    guarded(telemetryRecordSubject('(seen)', resourceId), () =>
      this.recordSeenInTransaction(resourceId, keys),
    );
  }

  async seen(resourceIds: readonly string[]): Promise<Set<string>> {
    return guarded(telemetryRecordSubject('(seen)'), () => {
      const keys = new Set<string>();
      for (const id of resourceIds) {
        const row = this.statements.seenOf.get(id);
        for (const key of row ? (JSON.parse(row.keys) as string[]) : []) keys.add(key);
      }
      return keys;
    });
  }
}
