import Database from 'better-sqlite3';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { ensurePrivateFile } from '../shared/core/security/privateFiles';

/**
 * One embedded host per SQLite file: two would both resume the same unfinished migrations and drive
 * one migration twice. The lock is SQLite's own (an exclusive lock on a small database beside the
 * data, `<file>.host`), so the kernel drops it with the process that held it: a host killed by SIGKILL
 * or a crash never leaves a lock behind that blocks the next start. Who holds it (pid, address, since)
 * is written to `<file>.host.json`, only so the refused host can name it.
 */

export interface HostHolder {
  pid: number;
  url?: string;
  since: string;
}

export class HostLockedError extends Error {
  override readonly name = 'HostLockedError';
  constructor(
    readonly dataPath: string,
    readonly holder: HostHolder | undefined,
  ) {
    const who = holder
      ? `the routelock host with pid ${holder.pid}${holder.url ? ` at ${holder.url}` : ''} (since ${holder.since})`
      : 'another routelock host';
    super(
      `${dataPath} is in use by ${who}. Stop that host, or give this one its own data with ROUTELOCK_SQLITE_PATH=<another file>.`,
    );
  }
}

export interface HostLock {
  /** Record the address the host listens on, for the message a second host prints. */
  announce(url: string): void;
  release(): void;
}

export function acquireHostLock(dataPath: string): HostLock {
  const lockPath = `${dataPath}.host`;
  const holderPath = `${dataPath}.host.json`;
  ensurePrivateFile(lockPath);
  const db = new Database(lockPath, { timeout: 0 });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // The first write takes the exclusive lock, and in this locking mode it is kept until close.
    db.exec('CREATE TABLE IF NOT EXISTS host (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL)');
    db.prepare('INSERT OR REPLACE INTO host (id, pid) VALUES (1, ?)').run(process.pid);
  } catch (error) {
    db.close();
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY')
      throw new HostLockedError(dataPath, holderAt(holderPath));
    throw error;
  }
  const holder: HostHolder = { pid: process.pid, since: new Date().toISOString() };
  const write = () => writeFileSync(holderPath, `${JSON.stringify(holder)}\n`, { mode: 0o600 });
  write();
  let released = false;
  return {
    announce(url) {
      holder.url = url;
      write();
    },
    release() {
      if (released) return;
      released = true;
      rmSync(holderPath, { force: true });
      db.close();
    },
  };
}

function holderAt(path: string): HostHolder | undefined {
  try {
    const parsed = JSON.parse(readFileSync(path, 'utf8')) as Partial<HostHolder>;
    return typeof parsed.pid === 'number' && typeof parsed.since === 'string'
      ? {
          pid: parsed.pid,
          since: parsed.since,
          ...(typeof parsed.url === 'string' ? { url: parsed.url } : {}),
        }
      : undefined;
  } catch {
    return undefined;
  }
}
