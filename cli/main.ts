import { readFileSync } from 'node:fs';
import { SingleBar } from 'cli-progress';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import {
  type CampaignLimitsPatch,
  type CampaignRequest,
  type CampaignStatus,
  MAX_CAMPAIGN_RESOURCES,
  MAX_IDS_PER_REQUEST,
  campaignStates,
} from '../shared/campaign/types';
import { type CutoverWindow, type MigrationStatus, migrationStates } from '../shared/migration/types';
import { ApiRefused, ApiUnreachable, DEFAULT_TIMEOUT_MS, RouteLockApi, defaultUrl } from './api';
import {
  EXIT,
  campaignDetails,
  campaignEnded,
  campaignExitCode,
  campaignBarValue,
  campaignProgressLine,
  campaignTable,
  campaignTally,
  duration,
  migrationDetails,
  migrationEnded,
  migrationExitCode,
  migrationProgressLine,
  migrationTable,
  outcomeCounts,
  parseLocation,
  preflightLines,
  campaignPreflightLines,
  windowFromFlags,
} from './format';

/**
 * `npx routelock campaign …|migration …`: the operator command line, a client of the HTTP API only.
 * Exit codes: 0 done, 1 the API refused, 2 bad usage (nothing sent), 3 the host did not answer,
 * 4 a `--watch` saw the campaign or migration end without moving every resource, 5 a `--dry-run` found a
 * check failing (`campaign start --dry-run` and `migration start --dry-run`).
 */

/** The exit codes, as every `--help` ends (the same table as the module's comment above). */
const EXIT_CODES_HELP = `
Exit codes:
  0  done
  1  the API refused (its problem is printed)
  2  bad usage: nothing was sent
  3  the host did not answer
  4  --watch saw the campaign or migration end without moving every resource
  5  --dry-run found a check failing`;

export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Reads `--resources-file -`. */
  stdin?: () => string;
  /** The environment the default URL is read from (PORT); process.env when not given. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Bad arguments, found before anything was sent. */
class UsageError extends Error {}

const positiveInt = (name: string) => (value: string) => {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError(`${name} must be a positive integer`);
  return Number(value);
};
const nonNegativeInt = (name: string) => (value: string) => {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError(`${name} must be a whole number`);
  return Number(value);
};
const seconds = (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0.2 || n > 3600)
    throw new InvalidArgumentError('must be 0.2 to 3600 seconds');
  return n;
};
const location = (value: string) => {
  try {
    return parseLocation(value);
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
};
const collect = (value: string, previous: string[] = []) => [...previous, value];

/** The cutover window flags both starts take (docs/design.md §6.10); the API validates the window itself. */
function windowOptions(command: Command): Command {
  return command
    .option('--not-before <iso>', 'take the write lock no earlier than this instant')
    .option('--not-after <iso>', 'take the write lock no later than this instant')
    .option('--daily <HH:MM-HH:MM>', 'take the write lock only in this daily span (with --time-zone)')
    .option('--time-zone <IANA>', "--daily's time zone (Europe/Amsterdam)");
}

/** The `window` body the flags build, or none; a malformed flag is a usage error (nothing sent). */
function windowOf(o: { notBefore?: string; notAfter?: string; daily?: string; timeZone?: string }): {
  window?: CutoverWindow;
} {
  let window: CutoverWindow | undefined;
  try {
    window = windowFromFlags(o);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return window === undefined ? {} : { window };
}

interface GlobalOptions {
  url?: string;
  key?: string;
  token?: string;
  json?: boolean;
  timeout: number;
}

/**
 * Human output carries text from elsewhere (a participant's preflight or verify detail, a failure
 * reason): control characters (an escape sequence could rewrite the terminal) are shown as `\u{…}`,
 * newlines and tabs kept. JSON output is escaped by JSON.stringify already.
 */
export const terminalSafe = (text: string): string =>
  // eslint-disable-next-line no-control-regex
  text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`);

/** `show --watch` sets the exit code it saw; every other command exits 0 when it did what it was asked. */
export function buildProgram(io: Io, result: { code: number } = { code: EXIT.ok }): Command {
  const out = (text: string) => io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  const note = (text: string) => io.stderr.write(`${text}\n`);

  const program = new Command('routelock')
    .description('Operate routelock migrations and campaigns through its HTTP API.')
    .addOption(
      new Option('--url <url>', "the host's base URL (default: http://127.0.0.1:${PORT:-7071}/api)").env(
        'ROUTELOCK_URL',
      ),
    )
    .addOption(
      new Option('--key <key>', 'a function key, sent as x-functions-key').env('ROUTELOCK_FUNCTION_KEY'),
    )
    .addOption(new Option('--token <token>', 'an Entra access token (Bearer)').env('ROUTELOCK_TOKEN'))
    .option('--json', "print the API's JSON")
    .addOption(
      new Option('--timeout <seconds>', 'give up on a request after this long')
        .argParser(seconds)
        .default(DEFAULT_TIMEOUT_MS / 1000),
    )
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    // Every subcommand's --help lists --url, --json, --key … too (set before any subcommand is made:
    // each inherits it) and ends with the exit codes.
    .configureHelp({ showGlobalOptions: true })
    .addHelpText('afterAll', EXIT_CODES_HELP)
    .showHelpAfterError('(see --help)');

  const globals = (cmd: Command): GlobalOptions => cmd.optsWithGlobals<GlobalOptions>();
  const api = (cmd: Command): RouteLockApi => {
    const g = globals(cmd);
    let url = g.url;
    if (!url)
      try {
        url = defaultUrl(io.env ?? process.env);
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
    try {
      return new RouteLockApi({
        url,
        functionKey: g.key || undefined,
        token: g.token || undefined,
        timeoutMs: g.timeout * 1000,
      });
    } catch (error) {
      throw new UsageError(`--url: ${(error as Error).message}`);
    }
  };
  const print = (cmd: Command, value: unknown, human: () => string) =>
    out(globals(cmd).json ? JSON.stringify(value, null, 2) : terminalSafe(human()));

  const readIds = (file: string | undefined, given: string[] | undefined, skip = 0): string[] => {
    let ids: string[];
    if (file !== undefined) {
      let text: string;
      try {
        text = file === '-' ? (io.stdin ?? (() => readFileSync(0, 'utf8')))() : readFileSync(file, 'utf8');
      } catch (error) {
        throw new UsageError(
          `--resources-file: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
        );
      }
      // One id a line; blank lines and # comments are skipped.
      ids = text
        .split(/\r?\n/)
        .map((l) => l.trim())
        .filter((l) => l !== '' && !l.startsWith('#'));
    } else ids = given ?? [];
    ids = ids.slice(skip);
    if (ids.length > MAX_CAMPAIGN_RESOURCES)
      throw new UsageError(`${ids.length} ids: a campaign holds at most ${MAX_CAMPAIGN_RESOURCES}`);
    return ids;
  };

  /** Append ids in pages of MAX_IDS_PER_REQUEST, with a progress line on stderr. */
  const appendPages = async (client: RouteLockApi, campaignId: string, ids: string[], offset: number) => {
    let added = 0;
    let duplicates = 0;
    let last: CampaignStatus | undefined;
    for (let i = 0; i < ids.length; i += MAX_IDS_PER_REQUEST) {
      const page = ids.slice(i, i + MAX_IDS_PER_REQUEST);
      try {
        const answer = await client.addResources(campaignId, page);
        added += answer.added;
        duplicates += answer.duplicates;
        last = answer.status;
      } catch (error) {
        if (error instanceof ApiRefused && error.problem.code === 'CampaignEnded') {
          // Nothing more can join it, so no "append the rest" hint: it would fail the same way.
          note(
            `campaign ${campaignId} has ended: it takes no more resources` +
              (i > 0 ? ` (${offset + i} of ${offset + ids.length} ids were sent before it ended)` : '') +
              '; start a new campaign for these ids',
          );
          throw error;
        }
        note(
          `stopped after ${offset + i} of ${offset + ids.length} ids; append the rest with ` +
            `\`campaign add ${campaignId} --resources-file … --skip ${offset + i}\``,
        );
        throw error;
      }
      note(
        `sent ${offset + i + page.length}/${offset + ids.length} ids (${added} added, ${duplicates} duplicates)`,
      );
    }
    return { added, duplicates, status: last };
  };

  // ---------------------------------------------------------------------------------------------
  const campaign = program.command('campaign').description('start, watch and steer campaigns');

  windowOptions(campaign.command('start'))
    .description('start a campaign moving many resources to one target')
    .requiredOption('--target <region[/account]>', 'where the resources go', location)
    .option('--resources-file <file>', 'resource ids, one a line (- for stdin)')
    .option('--resource <id>', 'a resource id (repeatable)', collect)
    .option('--from <region>', 'every route now at this region')
    .option('--limit <n>', 'with --from: at most this many', positiveInt('--limit'))
    .option(
      '--max-concurrent <n>',
      'at most this many migrations at once (API default 10)',
      positiveInt('--max-concurrent'),
    )
    .option(
      '--starts-per-minute <n>',
      'at most this many starts in any minute',
      positiveInt('--starts-per-minute'),
    )
    .option('--attempts <n>', "each migration's attempts", positiveInt('--attempts'))
    .option('--campaign-id <id>', 'its id (default: the API chooses)')
    .option(
      '--dry-run',
      'only report what a create would meet: each resource checked, the estimate (writes nothing; exit 5 when a check fails)',
    )
    .action(async (o, cmd: Command) => {
      const sources = [o.resourcesFile !== undefined, o.resource !== undefined, o.from !== undefined];
      if (sources.filter(Boolean).length !== 1)
        throw new UsageError('give exactly one of --resources-file, --resource or --from');
      if (o.limit !== undefined && o.from === undefined) throw new UsageError('--limit goes with --from');
      const ids = o.from === undefined ? readIds(o.resourcesFile, o.resource) : undefined;
      if (ids && ids.length === 0) throw new UsageError('no resource ids given');
      const window = windowOf(o);
      const client = api(cmd);
      const request: CampaignRequest = {
        ...(o.campaignId !== undefined ? { campaignId: o.campaignId } : {}),
        target: o.target,
        ...(ids ? { resources: ids.slice(0, MAX_IDS_PER_REQUEST) } : {}),
        ...(o.from !== undefined
          ? { from: { region: o.from, ...(o.limit !== undefined ? { limit: o.limit } : {}) } }
          : {}),
        ...(o.maxConcurrent !== undefined ? { maxConcurrent: o.maxConcurrent } : {}),
        ...(o.startsPerMinute !== undefined ? { startsPerMinute: o.startsPerMinute } : {}),
        ...(o.attempts !== undefined ? { migrationAttempts: o.attempts } : {}),
        ...window,
      };
      if (o.dryRun === true) {
        // one request's ids: the dry run answers for those (a create sends the rest as appended pages)
        if (ids && ids.length > MAX_IDS_PER_REQUEST)
          note(`the dry run covers the first ${MAX_IDS_PER_REQUEST} of ${ids.length} ids (one request's)`);
        const report = await client.preflightCampaign(request);
        print(cmd, report, () => campaignPreflightLines(report));
        if (!report.ok) result.code = EXIT.checkFailed;
        return;
      }
      const started = await client.startCampaign(request);
      const rest = ids ? ids.slice(MAX_IDS_PER_REQUEST) : [];
      if (rest.length > 0) {
        if (started.created) {
          note(`sent ${MAX_IDS_PER_REQUEST}/${ids?.length} ids`);
          await appendPages(client, started.campaignId, rest, MAX_IDS_PER_REQUEST);
        } else
          note(
            `campaign ${started.campaignId} already existed: no ids were added again ` +
              `(append with \`campaign add ${started.campaignId} --resources-file … --skip n\`)`,
          );
      }
      print(cmd, started, () =>
        started.created
          ? `started campaign ${started.campaignId}; watch it with \`npx routelock campaign show ${started.campaignId} --watch\``
          : `campaign ${started.campaignId} already exists (same target): nothing new started`,
      );
    });

  campaign
    .command('add')
    .description('append resource ids to a running or paused campaign')
    .argument('<campaignId>')
    .option('--resources-file <file>', 'resource ids, one a line (- for stdin)')
    .option('--resource <id>', 'a resource id (repeatable)', collect)
    .option('--skip <n>', 'skip the first n ids (resume an interrupted append)', nonNegativeInt('--skip'), 0)
    .action(async (campaignId: string, o, cmd: Command) => {
      if ((o.resourcesFile !== undefined) === (o.resource !== undefined))
        throw new UsageError('give exactly one of --resources-file or --resource');
      const ids = readIds(o.resourcesFile, o.resource, o.skip);
      if (ids.length === 0) throw new UsageError('no resource ids given');
      const result = await appendPages(api(cmd), campaignId, ids, o.skip);
      print(cmd, result, () => `added ${result.added}, ${result.duplicates} already in the campaign`);
    });

  campaign
    .command('show')
    .description("a campaign's status")
    .argument('<campaignId>')
    .option('--watch', 'redraw a progress bar until it ends')
    .option('--interval <seconds>', 'between reads while watching', seconds, 2)
    .action(async (campaignId: string, o, cmd: Command) => {
      const client = api(cmd);
      if (!o.watch) {
        const s = await client.campaign(campaignId);
        print(cmd, s, () => campaignDetails(s));
        return;
      }
      const final = await watch(
        io,
        o.interval,
        () => client.campaign(campaignId),
        campaignEnded,
        campaignView,
      );
      print(cmd, final, () => campaignDetails(final));
      result.code = campaignExitCode(final);
    });

  campaign
    .command('list')
    .description('campaigns, newest first')
    .addOption(new Option('--status <state>', 'only these').choices(campaignStates))
    .option('--limit <n>', 'at most this many', positiveInt('--limit'))
    .option('--continuation <token>', 'the next page (printed after a full page)')
    .action(async (o, cmd: Command) => {
      const page = await api(cmd).campaigns({
        status: o.status,
        limit: o.limit,
        continuation: o.continuation,
      });
      print(cmd, page, () => campaignTable(page.items) + continuationHint(page.continuation));
    });

  for (const command of ['pause', 'resume', 'cancel'] as const)
    campaign
      .command(command)
      .description(
        {
          pause: 'start nothing new; running migrations finish',
          resume: 'start again after a pause',
          cancel: 'cancel pending members and every running migration',
        }[command],
      )
      .argument('<campaignId>')
      .action(async (campaignId: string, _o, cmd: Command) => {
        const s = await api(cmd).campaignCommand(campaignId, command);
        print(cmd, s, () => `${s.campaignId}: ${s.status} (${campaignTally(s)})`);
      });

  campaign
    .command('limits')
    .description("change a running campaign's limits")
    .argument('<campaignId>')
    .option('--max-concurrent <n>', 'at most this many at once', positiveInt('--max-concurrent'))
    .option(
      '--starts-per-minute <n>',
      'at most this many starts a minute',
      positiveInt('--starts-per-minute'),
    )
    .option('--no-rate-limit', 'remove the starts-per-minute limit')
    .action(async (campaignId: string, o, cmd: Command) => {
      if (o.rateLimit === false && o.startsPerMinute !== undefined)
        throw new UsageError('--starts-per-minute and --no-rate-limit contradict each other');
      const patch: CampaignLimitsPatch = {
        ...(o.maxConcurrent !== undefined ? { maxConcurrent: o.maxConcurrent } : {}),
        ...(o.startsPerMinute !== undefined ? { startsPerMinute: o.startsPerMinute } : {}),
        ...(o.rateLimit === false ? { startsPerMinute: null } : {}),
      };
      if (Object.keys(patch).length === 0)
        throw new UsageError('give --max-concurrent, --starts-per-minute or --no-rate-limit');
      const s = await api(cmd).updateCampaign(campaignId, patch);
      print(cmd, s, () => campaignDetails(s));
    });

  // ---------------------------------------------------------------------------------------------
  const migration = program.command('migration').description('start, watch, cancel and retry migrations');

  windowOptions(migration.command('start'))
    .description('move one resource (or join the migration it already has)')
    .argument('<resourceId>')
    .requiredOption('--target <region[/account]>', 'where it goes', location)
    .option('--migration-id <id>', 'its id (a repeated start with it joins)')
    .option('--dry-run', 'only report what a start would meet (writes nothing; exit 5 when a check fails)')
    .action(async (resourceId: string, o, cmd: Command) => {
      const body = {
        resourceId,
        target: o.target,
        ...(o.migrationId !== undefined ? { migrationId: o.migrationId } : {}),
        ...windowOf(o),
      };
      if (o.dryRun === true) {
        const report = await api(cmd).preflightMigration(body);
        print(cmd, report, () => preflightLines(report));
        if (!report.ok) result.code = EXIT.checkFailed;
        return;
      }
      const started = await api(cmd).startMigration(body);
      print(
        cmd,
        started,
        () =>
          `migration ${started.migrationId} accepted; watch it with \`npx routelock migration show ${started.migrationId} --watch\``,
      );
    });

  migration
    .command('show')
    .description("a migration's status")
    .argument('<migrationId>')
    .option('--watch', 'redraw its phase until it ends')
    .option('--interval <seconds>', 'between reads while watching', seconds, 1)
    .action(async (migrationId: string, o, cmd: Command) => {
      const client = api(cmd);
      if (!o.watch) {
        const m = await client.migration(migrationId);
        print(cmd, m, () => migrationDetails(m));
        return;
      }
      const final = await watch(
        io,
        o.interval,
        () => client.migration(migrationId),
        migrationEnded,
        migrationView,
      );
      print(cmd, final, () => migrationDetails(final));
      result.code = migrationExitCode(final);
    });

  migration
    .command('list')
    .description('migrations, newest first')
    .addOption(new Option('--status <state>', 'only these').choices(migrationStates))
    .option('--resource <id>', "only this resource's")
    .option('--campaign <id>', "only this campaign's")
    .option('--limit <n>', 'at most this many', positiveInt('--limit'))
    .option('--continuation <token>', 'the next page (printed after a full page)')
    .action(async (o, cmd: Command) => {
      const page = await api(cmd).migrations({
        status: o.status,
        resourceId: o.resource,
        campaignId: o.campaign,
        limit: o.limit,
        continuation: o.continuation,
      });
      print(cmd, page, () => migrationTable(page.items) + continuationHint(page.continuation));
    });

  migration
    .command('cancel')
    .description('stop it at its next step and release its lock (409 after the swap)')
    .argument('<migrationId>')
    .action(async (migrationId: string, _o, cmd: Command) => {
      const m = await api(cmd).cancelMigration(migrationId);
      print(
        cmd,
        m,
        () =>
          `${m.migrationId}: ${m.status}, phase ${m.phase}${m.cancelRequestedAt ? ', cancel requested' : ''}`,
      );
    });

  migration
    .command('retry')
    .description('start a new attempt of a migration that ended Failed')
    .argument('<migrationId>')
    .action(async (migrationId: string, _o, cmd: Command) => {
      const started = await api(cmd).retryMigration(migrationId);
      print(cmd, started, () => `migration ${started.migrationId}: new attempt accepted`);
    });

  return program;
}

const continuationHint = (continuation: string | undefined) =>
  continuation ? `\nmore: --continuation ${continuation}` : '';

/** What a watch draws: a bar (value of total) and its payload, or a line without a terminal. */
interface WatchView<T> {
  value: (s: T) => number;
  total: (s: T) => number;
  format: string;
  payload: (s: T) => Record<string, string>;
  line: (s: T) => string;
}

const campaignView: WatchView<CampaignStatus> = {
  value: (s) => campaignBarValue(s).value,
  total: (s) => Math.max(1, s.counts.total),
  format: '{id} {status} {bar} {value}/{total} {what} | running {running} | {outcomes} | eta {etaText}',
  payload: (s) => ({
    id: s.campaignId,
    status: s.status,
    what: campaignBarValue(s).what,
    running: String(s.counts.running),
    outcomes: outcomeCounts(s.counts),
    etaText: duration(s.etaSeconds),
  }),
  line: campaignProgressLine,
};

const phaseOrder = ['starting', 'prelock', 'converging', 'hardDelete', 'write', 'swapped', 'released'];
const migrationView: WatchView<MigrationStatus> = {
  value: (m) =>
    m.status === 'Completed' || m.status === 'NoOp'
      ? phaseOrder.length - 1
      : Math.max(0, phaseOrder.indexOf(m.phase)),
  total: () => phaseOrder.length - 1,
  format: '{id} {status} {bar} phase {phase}',
  payload: (m) => ({ id: m.migrationId, status: m.status, phase: m.phase }),
  line: migrationProgressLine,
};

/** Consecutive unanswered reads a watch rides out (a host restart) before it gives up (exit 3). */
const WATCH_UNREACHABLE_TRIES = 5;

/** Read until `ended`, drawing on stderr (a bar on a terminal, a line per change otherwise). */
async function watch<T>(
  io: Io,
  intervalSeconds: number,
  read: () => Promise<T>,
  ended: (s: T) => boolean,
  view: WatchView<T>,
): Promise<T> {
  const tty = io.stderr.isTTY === true;
  const bar = tty
    ? new SingleBar({
        format: view.format,
        stream: io.stderr,
        hideCursor: true,
        barsize: 24,
        clearOnComplete: false,
      })
    : undefined;
  let started = false;
  let lastLine = '';
  let misses = 0;
  const stop = () => bar?.stop();
  process.once('SIGINT', () => {
    stop();
    process.exit(130);
  });
  try {
    for (;;) {
      let s: T;
      try {
        s = await read();
        misses = 0;
      } catch (error) {
        if (!(error instanceof ApiUnreachable) || ++misses >= WATCH_UNREACHABLE_TRIES) throw error;
        if (!bar) io.stderr.write(`${error.message}; retrying\n`);
        await sleep(intervalSeconds * 1000);
        continue;
      }
      if (bar) {
        if (!started) bar.start(view.total(s), view.value(s), view.payload(s));
        else {
          bar.setTotal(view.total(s));
          bar.update(view.value(s), view.payload(s));
        }
        started = true;
      } else {
        const line = view.line(s);
        if (line !== lastLine) io.stderr.write(`${line}\n`);
        lastLine = line;
      }
      if (ended(s)) return s;
      await sleep(intervalSeconds * 1000);
    }
  } finally {
    stop();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Parse and run; resolves with the exit code (the process is not exited here). */
export async function run(argv: readonly string[], io: Io): Promise<number> {
  const result = { code: EXIT.ok as number };
  const program = buildProgram(io, result);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return result.code;
  } catch (error) {
    return failure(error, io);
  }
}

function failure(error: unknown, io: Io): number {
  if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (error instanceof UsageError) {
    io.stderr.write(`error: ${error.message}\n`);
    return EXIT.usage;
  }
  if (error instanceof ApiRefused) {
    io.stderr.write(`error: ${error.message}\n`);
    // Validation problems list each field; the detail often quotes them already.
    for (const e of error.problem.errors ?? [])
      if (!error.problem.detail?.includes(e)) io.stderr.write(`  - ${e}\n`);
    return EXIT.refused;
  }
  if (error instanceof ApiUnreachable) {
    io.stderr.write(`error: ${error.message}\n`);
    return EXIT.unreachable;
  }
  io.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  return EXIT.refused;
}
