import pino from 'pino';
import type { LogLine } from './server';

/**
 * The embedded host's log: one JSON line per entry on stdout ({level, time, message, ...fields}, the
 * Functions log levels by name), written by pino through an asynchronous destination. The host logs a
 * line per request; written synchronously, each one blocked the event loop on stdout (18 MB in 12 s of
 * load). Lines held when the process stops are written by `flush()` (the host's close, on SIGTERM and
 * SIGINT) or, on any other exit, by an exit hook.
 *
 * Nothing logged carries a credential by construction (the access line has the path, never the query,
 * the headers or a body); `redactedPaths` is the second line of defence: a field by one of these names
 * is written as "[redacted]".
 */

const levels = { trace: 10, debug: 20, information: 30, warning: 40, error: 50, critical: 60 } as const;
type Level = keyof typeof levels;

// Exact paths only: a wildcard (`*.token`) made every line cost four times as much.
// A name with a dash is bracketed (`["x-functions-key"]`): quoted alone it matches nothing.
export const redactedPaths = [
  'token',
  'fencingToken',
  'accessToken',
  'idempotencyKey',
  'authorization',
  'cookie',
  '["x-functions-key"]',
  '["idempotency-key"]',
  'headers.authorization',
  'headers.cookie',
  'headers["x-functions-key"]',
  'headers["idempotency-key"]',
];

/**
 * The most log bytes held for stdout. Past it lines are dropped (counted on stderr at exit) rather than
 * memory growing without bound behind a reader that has stopped reading: a log must never take the host down.
 */
export const MAX_HELD_LOG_BYTES = 16 * 1024 * 1024;

export interface HostLog {
  log: LogLine;
  /** Write out every buffered line now, synchronously. */
  flush(): void;
}

/** The host's log over any pino destination (tests pass their own stream). */
export function pinoLog(destination: pino.DestinationStream, flush: () => void = () => undefined): HostLog {
  const logger = pino<Level, true>(
    {
      customLevels: levels,
      useOnlyCustomLevels: true,
      level: 'trace',
      base: undefined,
      messageKey: 'message',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: redactedPaths, censor: '[redacted]' },
    },
    destination,
  );
  return {
    log: (level, message, fields) => {
      if (level !== 'none') logger[level](fields, message);
    },
    flush,
  };
}

let stdoutLog: HostLog | undefined;

/**
 * The process's one stdout log, created on first use. The lines of one event-loop turn go out in one
 * asynchronous write (at 10 k requests/s a write per line cost more than the request's own work: a
 * thread-pool hand-off each); they are on stdout within a turn, and `flush()` (or the process's exit)
 * writes out whatever is still held, synchronously.
 */
export function stdoutHostLog(): HostLog {
  if (stdoutLog) return stdoutLog;
  const destination = pino.destination({ dest: 1, sync: false, maxLength: MAX_HELD_LOG_BYTES });
  let dropped = 0;
  destination.on('drop', () => (dropped += 1));
  let batch = '';
  const writeBatch = () => {
    if (batch === '') return;
    const lines = batch;
    batch = '';
    destination.write(lines);
  };
  const flush = () => {
    writeBatch();
    destination.flushSync();
    if (dropped > 0) process.stderr.write(`routelock: ${dropped} log writes dropped (stdout not read)\n`);
    dropped = 0;
  };
  process.once('exit', flush);
  const batching = {
    write(line: string) {
      if (batch === '') setImmediate(writeBatch);
      batch += line;
    },
  };
  stdoutLog = pinoLog(batching, flush);
  return stdoutLog;
}
