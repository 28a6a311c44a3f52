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
    'Try it (token handling needs only node):',
    `  curl -s -X PUT ${api}/routes/conv-42 ${json} -d '{"location":{"region":"westeurope"}}'`,
    `  TOKEN=$(curl -s -X POST ${api}/routes/conv-42/prelock ${json} -d '{"migrationId":"m-1","owner":"me","target":{"region":"eastus"}}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).token')`,
    `  sleep ${t.convergenceDelaySeconds + 1}   # the convergence delay: escalating earlier is 409 ConvergencePending`,
    `  curl -s -X POST ${api}/routes/conv-42/escalate ${json} -d '{"token":"'$TOKEN'","phase":"hardDelete"}'`,
    `  WRITE_AT=$(curl -s -X POST ${api}/routes/conv-42/escalate ${json} -d '{"token":"'$TOKEN'","phase":"write"}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).writeAt')`,
    `  curl -s ${api}/routes/conv-42`,
    `  curl -s -X POST ${api}/routes/conv-42/swap ${json} -d '{"token":"'$TOKEN'","writeAt":"'$WRITE_AT'"}'`,
    '',
    'Or let the orchestration do all four phases:',
    `  curl -s -X PUT ${api}/routes/conv-7 ${json} -d '{"location":{"region":"westeurope"}}'`,
    `  curl -s -X POST ${api}/migrations ${json} -d '{"resourceId":"conv-7","target":{"region":"eastus"}}'`,
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
