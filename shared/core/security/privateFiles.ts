import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  statSync,
} from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * Files that hold secrets or what derives them (the token key file, the embedded host's databases) must
 * be this process's own: created by it owner-only, in a folder nobody else can write, never reached
 * through a symbolic link. A folder or file another local user prepared beforehand (a shared /tmp, a
 * planted key file) is refused with the reason, rather than trusted because its mode bits look right.
 */

export class PrivateFileError extends Error {
  override readonly name = 'PrivateFileError';
}

const uid = (): number | undefined => (typeof process.getuid === 'function' ? process.getuid() : undefined);
const ownedBySelfOrRoot = (owner: number, self: number) => owner === self || owner === 0;

/** Create the folder (0700) if absent; refuse one that another user owns or that group or others may write. */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const self = uid();
  if (self === undefined) return; // Windows: no POSIX owners or modes to check
  const stat = statSync(resolve(dir));
  if (!ownedBySelfOrRoot(stat.uid, self) || (stat.mode & 0o022) !== 0) {
    throw new PrivateFileError(
      `${dir} must be a folder owned by this user (uid ${self}) that nobody else may write (it is uid ${stat.uid}, mode ${(stat.mode & 0o7777).toString(8)}); choose another path`,
    );
  }
}

/**
 * Check an existing secret file: a regular file (not a link), owned by this process's user, mode 0600 or
 * stricter. Returns false when there is no file.
 */
export function checkPrivateFile(path: string, options: { tighten?: boolean } = {}): boolean {
  let stat;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
  const self = uid();
  if (self === undefined) return true;
  if (!stat.isFile()) throw new PrivateFileError(`${path} must be a regular file, not a link or a folder`);
  if (stat.uid !== self) {
    throw new PrivateFileError(`${path} belongs to uid ${stat.uid}, not this user (uid ${self}); remove it`);
  }
  if ((stat.mode & 0o077) !== 0 && options.tighten) {
    chmodSync(path, 0o600); // our own file from before files were made owner-only: tighten it
  } else if ((stat.mode & 0o077) !== 0) {
    throw new PrivateFileError(
      `${path} is readable or writable by others (mode ${(stat.mode & 0o777).toString(8)}); run chmod 600 on it`,
    );
  }
  return true;
}

/**
 * Create `path` empty and owner-only unless it exists; an existing one must be ours (and is tightened to
 * 0600). Its folder is made private first.
 */
export function ensurePrivateFile(path: string): void {
  ensurePrivateDir(dirname(path));
  if (checkPrivateFile(path, { tighten: true })) return;
  try {
    closeSync(openSync(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | noFollow(), 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    checkPrivateFile(path, { tighten: true }); // another process of ours created it first
  }
}

/** Open a secret file for reading without following a link, and check the file actually opened. */
export function openPrivateFileForReading(path: string): number {
  const fd = openSync(path, constants.O_RDONLY | noFollow());
  const self = uid();
  if (self !== undefined) {
    const stat = fstatSync(fd);
    if (stat.uid !== self || (stat.mode & 0o077) !== 0 || !stat.isFile()) {
      closeSync(fd);
      checkPrivateFile(path); // throws the reason
      throw new PrivateFileError(`${path} changed while it was opened`);
    }
  }
  return fd;
}

function noFollow(): number {
  return constants.O_NOFOLLOW ?? 0;
}
