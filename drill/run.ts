import { runDrill } from './drill';
import { formatSummary } from './summary';

/**
 * `npm run drill [-- --resources N --migrations N --rate N --duration S --json --no-verification-step
 * --without-verify --ignore-prefer-wait --ignore-write-lock]`:
 * migrations under user traffic, then the checks. Exit 1 on any violation.
 */

const args = process.argv.slice(2);
const number = (name: string, fallback: number): number => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  if (!Number.isFinite(value) || value <= 0) {
    process.stderr.write(`--${name} takes a positive number, got "${args[i + 1] ?? ''}"\n`);
    process.exit(2);
  }
  return value;
};
const json = args.includes('--json');
const port = args.includes('--port') ? number('port', 0) : 0;

const bar = (done: number, total: number, width = 28) => {
  const filled = Math.round((Math.min(done, total) / Math.max(1, total)) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
};

async function main(): Promise<void> {
  const options = {
    resources: number('resources', 40),
    migrations: number('migrations', 12),
    rate: number('rate', 60),
    duration: number('duration', 20),
    ignoreWriteLock: args.includes('--ignore-write-lock'),
    verificationStep: !args.includes('--no-verification-step'),
    withoutVerify: args.includes('--without-verify'),
    honoursPreferWait: !args.includes('--ignore-prefer-wait'),
    ...(port ? { port } : {}),
  };
  const tty = process.stdout.isTTY && !json;
  const summary = await runDrill(
    {
      ...options,
      ...(json
        ? {}
        : {
            onProgress: (p) => {
              const done =
                (p.statuses.Completed ?? 0) +
                (p.statuses.Failed ?? 0) +
                (p.statuses.Conflict ?? 0) +
                (p.statuses.NoOp ?? 0);
              const phases =
                Object.entries(p.phases)
                  .map(([k, v]) => `${k} ${v}`)
                  .join(', ') || 'none in flight';
              const line = `${bar(done, options.migrations)} ${done}/${options.migrations} migrations done · in flight: ${phases} · ${p.operations} user ops · ${p.elapsedSeconds.toFixed(0)}s`;
              process.stdout.write(tty ? `\r${line.padEnd(120)}` : `${line}\n`);
            },
          }),
      log: (line) => process.stderr.write(`${line}\n`),
    },
    {
      onHost: (host) => {
        if (!json)
          process.stdout.write(
            `routelock drill: host ${host.url} (status page ${host.url}/api/status) · ${options.resources} conversations, ${options.migrations} migrations, ${options.rate} ops/s for ${options.duration} s\n`,
          );
      },
    },
  );
  if (json) {
    process.stdout.write(`${JSON.stringify(summary)}\n`);
  } else {
    process.stdout.write(formatSummary(summary));
  }
  process.exit(summary.violations.length === 0 ? 0 : 1);
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
