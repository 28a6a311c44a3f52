import type { AddressInfo } from 'node:net';
import { healthEndpoints } from '../functions/health';
import type { HttpEndpoint } from '../functions/http/endpoint';
import { lockEndpoints } from '../functions/locks';
import { routeEndpoints } from '../functions/routes';
import { type Services, createServices, useServices } from '../functions/services';
import type { Clock } from '../shared/clock';
import { type Config, parseConfig } from '../shared/config';
import type { LocationStore } from '../shared/store/port';
import { parseHostConfig } from './config';
import { type LogLine, createLocalServer } from './server';

/** Every HTTP endpoint the Functions app declares: the embedded host serves exactly these. */
export const allEndpoints: HttpEndpoint[] = [...healthEndpoints, ...routeEndpoints, ...lockEndpoints];

export interface LocalHost {
  url: string;
  config: Config;
  services: Services;
  close(): Promise<void>;
}

export interface LocalHostOptions {
  env?: Record<string, string | undefined>;
  log?: LogLine;
  clock?: Clock;
  store?: LocationStore;
}

/** The embedded host's defaults: the dev timing profile unless the environment says otherwise. */
export function localEnv(env: Record<string, string | undefined>): Record<string, string | undefined> {
  return { ...env, ROUTELOCK_PROFILE: env.ROUTELOCK_PROFILE?.trim() || 'dev' };
}

export const jsonLog: LogLine = (level, message, fields) => {
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...fields })}\n`);
};

export async function startLocalHost(options: LocalHostOptions = {}): Promise<LocalHost> {
  const env = localEnv(options.env ?? process.env);
  const config = parseConfig(env);
  const hostConfig = parseHostConfig(env);
  const services = await createServices(config, {
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.store ? { store: options.store } : {}),
  });
  useServices(services);
  const server = createLocalServer({ endpoints: allEndpoints, log: options.log ?? jsonLog });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(hostConfig.port, hostConfig.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const hostForUrl = hostConfig.host.includes(':') ? `[${hostConfig.host}]` : hostConfig.host;
  let closed = false;
  return {
    url: `http://${hostForUrl}:${port}`,
    config,
    services,
    async close() {
      if (closed) return;
      closed = true;
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await services.store.close();
    },
  };
}
