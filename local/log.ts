import pino from 'pino';
import type { LogLine } from './server';

/**
 * The embedded host's log: one JSON line per entry on stdout ({level, time, message, ...fields}, the
 * Functions log levels by name), written by pino through an asynchronous destination. The host logs a
 * line per request; written synchronously, each one blocked the event loop on stdout (18 MB in 12 s of
 * load). Lines buffered when the process stops are written by `flush()` (the host's close, on SIGTERM and
 * SIGINT) or, on any other exit, by pino's own exit hook.
 *
 * Nothing logged carries a credential by construction (the access line has the path, never the query,
 * the headers or a body); `redactedPaths` is the second line of defence: a field by one of these names
 * is written as "[redacted]".
 */

const levels = { trace: 10, debug: 20, information: 30, warning: 40, error: 50, critical: 60 } as const;
type Level = keyof typeof levels;

export const redactedPaths = [
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'cookie',
  '*.cookie',
  '"x-functions-key"',
  '*["x-functions-key"]',
  'code_verifier',
  'accessToken',
  '*.accessToken',
];

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

/** The process's one stdout log (fd 1, asynchronous), created on first use. */
export function stdoutHostLog(): HostLog {
  if (!stdoutLog) {
    const destination = pino.destination({ dest: 1, sync: false });
    stdoutLog = pinoLog(destination, () => destination.flushSync());
  }
  return stdoutLog;
}
