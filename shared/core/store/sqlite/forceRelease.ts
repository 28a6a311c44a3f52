import type { ForceReleaseRequest } from '../../audit';
import { changedSinceRead, forceReleaseRequestSubject } from '../errors';
import type { ForceReleaseRequests } from '../ports/forceRelease';
import { guarded } from './errors';
import { SqliteTables } from './open';

/** The embedded host's force-release requests: table `force_release_requests`, saved by version. */
export class SqliteForceReleaseRequests extends SqliteTables implements ForceReleaseRequests {
  private readonly statements;

  constructor(path: string) {
    super(
      path,
      `
      CREATE TABLE IF NOT EXISTS force_release_requests (
        id TEXT PRIMARY KEY,
        version INTEGER NOT NULL,
        request TEXT NOT NULL
      );
    `,
    );
    this.statements = {
      create: this.db.prepare<[string, number, string]>(
        'INSERT INTO force_release_requests (id, version, request) VALUES (?, ?, ?)',
      ),
      get: this.db.prepare<[string], { request: string }>(
        'SELECT request FROM force_release_requests WHERE id = ?',
      ),
      save: this.db.prepare<[number, string, string, number]>(
        'UPDATE force_release_requests SET version = ?, request = ? WHERE id = ? AND version = ?',
      ),
    };
  }

  async create(request: ForceReleaseRequest): Promise<void> {
    guarded(forceReleaseRequestSubject(request.id, request.resourceId), () =>
      this.statements.create.run(request.id, request.version, JSON.stringify(request)),
    );
  }

  async get(id: string): Promise<ForceReleaseRequest | null> {
    const row = guarded(forceReleaseRequestSubject(id), () => this.statements.get.get(id));
    return row ? (JSON.parse(row.request) as ForceReleaseRequest) : null;
  }

  async save(request: ForceReleaseRequest): Promise<ForceReleaseRequest> {
    const subject = forceReleaseRequestSubject(request.id, request.resourceId);
    const next = { ...request, version: request.version + 1 };
    const result = guarded(subject, () =>
      this.statements.save.run(next.version, JSON.stringify(next), request.id, request.version),
    );
    if (result.changes === 0) throw changedSinceRead(subject);
    return next;
  }
}
