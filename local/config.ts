import { z } from 'zod';
import { type AuthConfig, ConfigError } from '../shared/config';
import { isLoopbackHostname } from '../shared/core/loopback';

/** Settings of the embedded host itself (the routing settings live in shared/config.ts). */
export interface HostConfig {
  host: string;
  port: number;
  limits: ServerLimits;
}

/**
 * What one caller can hold of the host before it has proved anything: each limit bounds the memory and
 * sockets a client that connects and then stalls (no headers, no identity, a body that never ends) ties
 * up, and each is a setting because a benchmark or a busy dev host may need more.
 */
export interface ServerLimits {
  /** ROUTELOCK_MAX_CONNECTIONS: open sockets at once; the next one is closed as it arrives. */
  maxConnections: number;
  /** ROUTELOCK_HEADERS_TIMEOUT_SECONDS: from connecting to the end of the request's headers. */
  headersTimeoutMs: number;
  /** ROUTELOCK_REQUEST_TIMEOUT_SECONDS: from connecting to the end of the request's body. */
  requestTimeoutMs: number;
  /** ROUTELOCK_KEEP_ALIVE_SECONDS: how long an idle kept-alive connection stays open. */
  keepAliveTimeoutMs: number;
}

const wholeNumber = (min: number, max: number, unit: string) =>
  z
    .string()
    .regex(/^\d{1,7}$/, { message: `expected a whole number of ${unit} from ${min} to ${max}` })
    .transform(Number)
    .refine((n) => n >= min && n <= max, {
      message: `expected a whole number of ${unit} from ${min} to ${max}`,
    });

const schema = z.object({
  PORT: z
    .string()
    .regex(/^\d{1,5}$/, { message: 'expected a TCP port number (0-65535)' })
    .transform(Number)
    .refine((n) => n <= 65535, { message: 'expected a TCP port number (0-65535)' })
    .default(7071),
  ROUTELOCK_HOST: z
    .string()
    .regex(/^[A-Za-z0-9.:[\]-]+$/, { message: 'expected a host name or IP address to bind' })
    .default('127.0.0.1'),
  ROUTELOCK_MAX_CONNECTIONS: wholeNumber(1, 100_000, 'connections').default(256),
  ROUTELOCK_HEADERS_TIMEOUT_SECONDS: wholeNumber(1, 600, 'seconds').default(10),
  ROUTELOCK_REQUEST_TIMEOUT_SECONDS: wholeNumber(1, 3600, 'seconds').default(30),
  ROUTELOCK_KEEP_ALIVE_SECONDS: wholeNumber(1, 600, 'seconds').default(5),
});

const names = [
  'PORT',
  'ROUTELOCK_HOST',
  'ROUTELOCK_MAX_CONNECTIONS',
  'ROUTELOCK_HEADERS_TIMEOUT_SECONDS',
  'ROUTELOCK_REQUEST_TIMEOUT_SECONDS',
  'ROUTELOCK_KEEP_ALIVE_SECONDS',
] as const;

export function parseHostConfig(env: Record<string, string | undefined>): HostConfig {
  const input = Object.fromEntries(names.map((name) => [name, env[name]?.trim() || undefined]));
  const result = schema.safeParse(input);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map(
        (i) => `${String(i.path[0])}: ${i.message} (got "${env[String(i.path[0])] ?? ''}")`,
      ),
    );
  }
  const d = result.data;
  const errors: string[] = [];
  // Node measures both from the connection's start: a request timeout under the headers one would
  // cut a request whose headers were still allowed to arrive.
  if (d.ROUTELOCK_REQUEST_TIMEOUT_SECONDS < d.ROUTELOCK_HEADERS_TIMEOUT_SECONDS)
    errors.push(
      `ROUTELOCK_REQUEST_TIMEOUT_SECONDS: must be at least ROUTELOCK_HEADERS_TIMEOUT_SECONDS (${d.ROUTELOCK_HEADERS_TIMEOUT_SECONDS} s), got ${d.ROUTELOCK_REQUEST_TIMEOUT_SECONDS}`,
    );
  if (errors.length > 0) throw new ConfigError(errors);
  return {
    host: d.ROUTELOCK_HOST,
    port: d.PORT,
    limits: {
      maxConnections: d.ROUTELOCK_MAX_CONNECTIONS,
      headersTimeoutMs: d.ROUTELOCK_HEADERS_TIMEOUT_SECONDS * 1000,
      requestTimeoutMs: d.ROUTELOCK_REQUEST_TIMEOUT_SECONDS * 1000,
      keepAliveTimeoutMs: d.ROUTELOCK_KEEP_ALIVE_SECONDS * 1000,
    },
  };
}

/** The limits a server built without a host configuration (tests, benchmarks) gets: the defaults. */
export const defaultServerLimits: ServerLimits = parseHostConfig({}).limits;

/**
 * The embedded host's rule for ROUTELOCK_AUTH: `none` lets every caller do everything, and `appservice`
 * trusts an `x-ms-client-principal` header that nothing strips here (no App Service authentication in
 * front), so both need a loopback bind. Only `entra` may listen on an address other machines reach.
 */
export function assertHostAuth(host: Pick<HostConfig, 'host' | 'port'>, auth: AuthConfig): void {
  if (auth.mode === 'entra' || isLoopbackHostname(host.host)) return;
  const why =
    auth.mode === 'none'
      ? 'lets every caller do everything'
      : 'trusts an x-ms-client-principal header that nothing strips on the embedded host';
  throw new ConfigError([
    `ROUTELOCK_AUTH: "${auth.mode}" ${why}, so it is refused while ROUTELOCK_HOST (${host.host}) is not a loopback address; bind 127.0.0.1 or use ROUTELOCK_AUTH=entra`,
  ]);
}
