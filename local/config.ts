import { z } from 'zod';
import { type AuthConfig, ConfigError } from '../shared/config';
import { isLoopbackHostname } from '../shared/loopback';

/** Settings of the embedded host itself (the routing settings live in shared/config.ts). */
export interface HostConfig {
  host: string;
  port: number;
}

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
});

export function parseHostConfig(env: Record<string, string | undefined>): HostConfig {
  const result = schema.safeParse({
    PORT: env.PORT?.trim() || undefined,
    ROUTELOCK_HOST: env.ROUTELOCK_HOST?.trim() || undefined,
  });
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map(
        (i) => `${String(i.path[0])}: ${i.message} (got "${env[String(i.path[0])] ?? ''}")`,
      ),
    );
  }
  return { host: result.data.ROUTELOCK_HOST, port: result.data.PORT };
}

/**
 * The embedded host's rule for ROUTELOCK_AUTH: `none` lets every caller do everything, and `appservice`
 * trusts an `x-ms-client-principal` header that nothing strips here (no App Service authentication in
 * front), so both need a loopback bind. Only `entra` may listen on an address other machines reach.
 */
export function assertHostAuth(host: HostConfig, auth: AuthConfig): void {
  if (auth.mode === 'entra' || isLoopbackHostname(host.host)) return;
  const why =
    auth.mode === 'none'
      ? 'lets every caller do everything'
      : 'trusts an x-ms-client-principal header that nothing strips on the embedded host';
  throw new ConfigError([
    `ROUTELOCK_AUTH: "${auth.mode}" ${why}, so it is refused while ROUTELOCK_HOST (${host.host}) is not a loopback address; bind 127.0.0.1 or use ROUTELOCK_AUTH=entra`,
  ]);
}
