import { PAGE_PATH } from '../functions/pages/statusPage';
import { ConfigError } from '../shared/config';
import { type LocalHost, PortInUseError, startLocalHost } from './host';
import { HostLockedError } from './hostLock';

/** `npm start`: the embedded host on 127.0.0.1:${PORT:-7071}, SQLite, dev timing unless set. */

function banner(host: LocalHost): string {
  const { config, url } = host;
  const store =
    config.store.kind === 'sqlite' ? `sqlite (${config.store.path})` : `cosmos (${config.store.endpoint})`;
  const t = config.timing;
  const api = `${url}/api`;
  const json = `-H 'content-type: application/json'`;
  return [
    `routelock embedded host listening on ${api}`,
    `  status page: ${url}${PAGE_PATH}`,
    `  API base:    ${api}`,
    `  store:   ${store}`,
    `  timing:  ${t.profile} (convergence delay ${t.convergenceDelaySeconds} s, write lease ${t.writeLeaseSeconds} s)`,
    '',
    // Each paste makes a fresh resource id, so the lines run again as they are.
    'Try it: a migration through all four phases (paste it again for another):',
    `  A=${api}; ID=conv-$RANDOM$RANDOM`,
    `  curl -s -X PUT $A/routes/$ID ${json} -d '{"location":{"region":"westeurope"}}'`,
    `  curl -s -X POST $A/migrations ${json} -d '{"resourceId":"'$ID'","target":{"region":"eastus"}}'`,
    '',
    'The phases by hand, campaigns and the CLI: README.md (Quick start), then docs/operators.md.',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  let host: LocalHost;
  try {
    host = await startLocalHost();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    if (error instanceof PortInUseError || error instanceof HostLockedError) {
      process.stderr.write(`routelock: could not start: ${error.message}\n`);
      process.exit(3);
    }
    process.stderr.write(`routelock: could not start: ${(error as Error).message}\n`);
    process.exit(1);
  }
  process.stdout.write(`${banner(host)}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`routelock: ${signal}, shutting down\n`);
    host.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`routelock: shutdown failed: ${(error as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

void main();
