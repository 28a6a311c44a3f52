import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, linkSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { inspect } from 'node:util';
import {
  PrivateFileError,
  checkPrivateFile,
  ensurePrivateDir,
  openPrivateFileForReading,
} from './privateFiles';

/**
 * The migration workflow's lock credentials, kept out of orchestration state (design
 * §9). The orchestration carries only a `LockSeed`: a random nonce made at start and
 * the id of the key it is used with. The activities, which alone hold the key ring, derive the
 * fencing token and the Idempotency-Key from it with HMAC-SHA256, so neither ever sits in a Durable
 * task hub, a journal, a record, a log line or a telemetry event. A seed without the key is useless.
 *
 * The key ring is versioned: new migrations use `current`; a running one keeps the key id in its seed,
 * so rotating (adding a key and making it current) strands nothing as long as old keys stay listed
 * until the migrations started under them have ended (at most the pre-lock cap, 72 h in production).
 */

export interface LockSeed {
  /** The key ring entry the credentials are derived under. */
  keyId: string;
  /** 32 random bytes, base64url; made when the migration starts, outside the orchestrator code. */
  nonce: string;
}

/**
 * An HMAC-SHA256 over a message, under the key ring entry `keyId`: what the process that holds the key
 * ring vouches for when the message passes through a store it does not trust (a task hub, a journal).
 */
export interface Seal {
  keyId: string;
  /** base64url. */
  mac: string;
}

export interface LockCredentials {
  token: string;
  idempotencyKey: string;
}

/** `{"current": "k1", "keys": {"k1": "<base64url of ≥ 32 random bytes>"}}`: ROUTELOCK_TOKEN_KEYS, or the key file. */
export interface TokenKeySet {
  current: string;
  keys: Record<string, string>;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
const MIN_KEY_BYTES = 32;

export class TokenKeyError extends Error {
  override readonly name = 'TokenKeyError';
}

/** Check a key set and decode its keys; throws TokenKeyError with a message fit for a config error. */
export function parseTokenKeySet(raw: string): TokenKeySet {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new TokenKeyError('expected JSON {"current":"k1","keys":{"k1":"<base64url, 32 random bytes>"}}');
  }
  const set = value as Partial<TokenKeySet> | null;
  if (
    !set ||
    typeof set !== 'object' ||
    typeof set.current !== 'string' ||
    !set.keys ||
    typeof set.keys !== 'object'
  ) {
    throw new TokenKeyError('expected {"current": "<key id>", "keys": {"<key id>": "<base64url key>"}}');
  }
  for (const [id, key] of Object.entries(set.keys)) {
    // An id that fails the pattern may be key material pasted in the wrong place: never quote it.
    if (!KEY_ID.test(id)) throw new TokenKeyError('every key id must be 1-32 letters, digits, - or _');
    if (typeof key !== 'string' || !/^[A-Za-z0-9_-]+={0,2}$/.test(key)) {
      throw new TokenKeyError(`key "${id}" must be base64url text`);
    }
    if (Buffer.from(key, 'base64url').length < MIN_KEY_BYTES) {
      throw new TokenKeyError(`key "${id}" is shorter than ${MIN_KEY_BYTES} bytes`);
    }
  }
  if (!(set.current in set.keys)) {
    throw new TokenKeyError(
      KEY_ID.test(set.current)
        ? `current key "${set.current}" is not in keys`
        : 'current names no key in keys',
    );
  }
  return { current: set.current, keys: { ...set.keys } };
}

export function newKeyMaterial(): string {
  return randomBytes(MIN_KEY_BYTES).toString('base64url');
}

/** A fresh key set of one key, or `previous` with a new current key added (rotation). */
export function rotateTokenKeySet(previous?: TokenKeySet, now: Date = new Date()): TokenKeySet {
  const base = `k${now.toISOString().slice(0, 10).replace(/-/g, '')}`;
  let id = base;
  for (let n = 2; previous && id in previous.keys; n += 1) id = `${base}-${n}`;
  return { current: id, keys: { [id]: newKeyMaterial(), ...(previous?.keys ?? {}) } };
}

export class TokenKeyring {
  private readonly keys: ReadonlyMap<string, Buffer>;
  readonly currentKeyId: string;

  constructor(set: TokenKeySet) {
    const checked = parseTokenKeySet(JSON.stringify(set));
    this.keys = new Map(Object.entries(checked.keys).map(([id, key]) => [id, Buffer.from(key, 'base64url')]));
    this.currentKeyId = checked.current;
  }

  /** A key ring that lives as long as the process: in-memory stores and tests. */
  static ephemeral(): TokenKeyring {
    return new TokenKeyring(rotateTokenKeySet());
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  /** A new migration's seed, under the current key. */
  newSeed(): LockSeed {
    return { keyId: this.currentKeyId, nonce: randomBytes(32).toString('base64url') };
  }

  /** The fencing token and Idempotency-Key of the lock a seed stands for. */
  credentials(seed: LockSeed): LockCredentials {
    const derive = (purpose: string) => this.mac(seed.keyId, purpose, seed.nonce);
    const token = derive('fencing-token');
    const idempotencyKey = derive('idempotency-key');
    if (token === undefined || idempotencyKey === undefined) {
      throw new TokenKeyError(
        `token key "${seed.keyId}" is not in the key ring (${this.keyIds.join(', ')}); a key was removed while a migration started under it was still running`,
      );
    }
    return { token, idempotencyKey };
  }

  /**
   * A seal over `message` under the current key, domain-separated by `purpose` (as the credentials
   * are) so a seal made for one use is never a valid one for another, nor a credential.
   */
  seal(purpose: string, message: string): Seal {
    return { keyId: this.currentKeyId, mac: this.mac(this.currentKeyId, purpose, message) as string };
  }

  /** Whether `seal` was made by `seal(purpose, message)`: false for a key no longer in the ring. */
  verifySeal(purpose: string, message: string, seal: Seal | undefined): boolean {
    if (typeof seal?.keyId !== 'string' || typeof seal.mac !== 'string') return false;
    const expected = this.mac(seal.keyId, purpose, message);
    if (expected === undefined) return false;
    const given = Buffer.from(seal.mac, 'base64url');
    const wanted = Buffer.from(expected, 'base64url');
    return given.length === wanted.length && timingSafeEqual(given, wanted);
  }

  /** The one derivation under the ring: credentials and seals differ only by `purpose`. */
  private mac(keyId: string, purpose: string, message: string): string | undefined {
    const key = this.keys.get(keyId);
    return key && createHmac('sha256', key).update(`routelock/${purpose}/v1\0${message}`).digest('base64url');
  }

  // Never print key material: not in a log line, an error report or a test failure.
  toJSON(): { current: string; keyIds: string[] } {
    return { current: this.currentKeyId, keyIds: this.keyIds };
  }

  [inspect.custom](): string {
    return `TokenKeyring { current: ${this.currentKeyId}, keyIds: [${this.keyIds.join(', ')}] }`;
  }
}

const OWNER_ONLY = 0o600;

/**
 * The embedded host's key file: created owner-only (32 random bytes) in a private folder when absent;
 * refused when it is a link, belongs to another user, or anyone else may read or write it or its folder
 * (core/security/privateFiles).
 */
export function loadTokenKeyFile(path: string): TokenKeyring {
  try {
    ensurePrivateDir(dirname(path));
    if (!checkPrivateFile(path)) {
      // Written whole under a temporary name, then linked into place: a process starting at the same
      // moment either wins or reads the winner's complete file, never a half-written one.
      const temp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
      const fd = openSync(temp, 'wx', OWNER_ONLY);
      try {
        writeSync(fd, `${JSON.stringify(rotateTokenKeySet(), null, 2)}\n`);
      } finally {
        closeSync(fd);
      }
      try {
        linkSync(temp, path);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      } finally {
        unlinkSync(temp);
      }
    }
    const fd = openPrivateFileForReading(path);
    try {
      return new TokenKeyring(parseTokenKeySet(readFileSync(fd, 'utf8')));
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    if (error instanceof PrivateFileError) throw new TokenKeyError(error.message);
    throw error;
  }
}

/**
 * A key set as the configuration carries it (ROUTELOCK_TOKEN_KEYS): checked when the configuration is
 * parsed, so a bad one names its variable, and opened into a ring only by `openTokenKeyring`, when the
 * host composes its services. Never printed, like the ring.
 */
export class ConfiguredKeySet {
  readonly #set: TokenKeySet;

  constructor(set: TokenKeySet) {
    this.#set = set;
  }

  get keySet(): TokenKeySet {
    return this.#set;
  }

  toJSON(): { current: string; keyIds: string[] } {
    return { current: this.#set.current, keyIds: Object.keys(this.#set.keys) };
  }

  [inspect.custom](): string {
    return `ConfiguredKeySet { current: ${this.#set.current}, keyIds: [${Object.keys(this.#set.keys).join(', ')}] }`;
  }
}

/** Where the workflow's token key ring comes from. */
export type TokenKeySource =
  | { kind: 'ring'; keys: ConfiguredKeySet }
  | { kind: 'file'; path: string }
  /** In-memory stores only: a key ring that dies with the process, as their data does. */
  | { kind: 'ephemeral' };

export interface SecurityConfig {
  tokenKeys: TokenKeySource;
}

/** Open the key ring a configuration names. */
export function openTokenKeyring(source: TokenKeySource): TokenKeyring {
  if (source.kind === 'ring') return new TokenKeyring(source.keys.keySet);
  if (source.kind === 'file') return loadTokenKeyFile(source.path);
  return TokenKeyring.ephemeral();
}
