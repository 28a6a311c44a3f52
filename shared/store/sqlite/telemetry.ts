import { telemetryRecordSubject } from '../errors';
import { type SeenVersions, mergeSeenKeys } from '../../telemetry/seen';
import {
  type ProbeCounts,
  type RecordedEvent,
  type RecorderJournal,
  type RecorderLimits,
  type RecorderState,
  recorderLimits,
} from '../../telemetry/sink';
import { guarded } from './errors';
import { SqliteTables } from './open';

/**
 * The embedded host's telemetry state, beside its migrations and ledger in the same SQLite file: the
 * journal of the recorder behind GET /api/metrics (so it survives a restart) and the versions the change
 * handler saw (for the reconciliation). Each counted event is one transaction: its key, its counts and
 * its values together, trimmed to the recorder's windows.
 */
export class SqliteTelemetry extends SqliteTables implements RecorderJournal, SeenVersions {
  private readonly statements;
  private readonly recordInTransaction: (event: RecordedEvent) => void;
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
        seq INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, value REAL NOT NULL
      );
      CREATE INDEX IF NOT EXISTS telemetry_values_name ON telemetry_values (name, seq);
      CREATE TABLE IF NOT EXISTS telemetry_probes (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS telemetry_seen (resource_id TEXT PRIMARY KEY, keys TEXT NOT NULL);
    `,
    );
    const db = this.db;
    this.statements = {
      keys: db.prepare<[], { key: string }>('SELECT key FROM telemetry_keys ORDER BY seq'),
      counts: db.prepare<[], { name: string; count: number }>('SELECT name, count FROM telemetry_counts'),
      values: db.prepare<[], { name: string; value: number }>(
        'SELECT name, value FROM telemetry_values ORDER BY seq',
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
      addValue: db.prepare<[string, number]>('INSERT INTO telemetry_values (name, value) VALUES (?, ?)'),
      // The seq of the newest row past the window (NULL while the window is not full: nothing goes).
      trimValues: db.prepare<{ name: string; keep: number }>(
        `DELETE FROM telemetry_values WHERE name = @name AND seq <= (
           SELECT seq FROM telemetry_values WHERE name = @name ORDER BY seq DESC LIMIT 1 OFFSET @keep)`,
      ),
      saveProbes: db.prepare<[string]>(
        'INSERT INTO telemetry_probes (id, state) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state',
      ),
      seenOf: db.prepare<[string], { keys: string }>('SELECT keys FROM telemetry_seen WHERE resource_id = ?'),
      saveSeen: db.prepare<[string, string]>(
        'INSERT INTO telemetry_seen (resource_id, keys) VALUES (?, ?) ON CONFLICT (resource_id) DO UPDATE SET keys = excluded.keys',
      ),
    };
    this.recordInTransaction = db.transaction((event: RecordedEvent) => {
      if (event.key !== undefined) {
        this.statements.addKey.run(event.key);
        this.statements.trimKeys.run(this.limits.keys);
      }
      for (const name of event.counts) this.statements.bump.run(name);
      for (const { name, value } of event.values) {
        this.statements.addValue.run(name, value);
        this.statements.trimValues.run({ name, keep: this.limits.values });
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
    guarded(telemetryRecordSubject('(recorder)'), () => this.recordInTransaction(event));
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
