import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type { Command } from 'commander';
import { buildProgram } from '../../cli/main';
import { functionEndpoints } from '../../functions/endpoints';

/**
 * The operators' guide's Runbook tells an operator what to run: every `routelock …` command (and each option it
 * passes) is one the command line has, and every HTTP call (`api …`, `curl …`) is a declared endpoint with
 * that method. A runbook whose commands do not exist fails during the incident it was written for.
 */

const readme = readFileSync(join(__dirname, '..', '..', 'docs', 'operators.md'), 'utf8');

/** The Runbook section: from its heading to the next second-level heading. */
function runbookSection(markdown: string): string {
  const start = markdown.indexOf('\n## Runbook\n');
  if (start < 0) throw new Error('docs/operators.md has no "## Runbook" section');
  const next = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
}

/** The lines of its sh blocks (any marker), continuation lines joined. */
function commandLines(section: string): string[] {
  const blocks = [...section.matchAll(/```(?:sh|bash)[^\n]*\n([\s\S]*?)```/g)].map((m) => m[1] as string);
  return blocks.flatMap((block) => block.replace(/\\\n\s*/g, ' ').split('\n')).filter((l) => l.trim() !== '');
}

const program = buildProgram({ stdout: new PassThrough(), stderr: new PassThrough() });

/** What is wrong with one `routelock …` line: an unknown command or option. */
function cliProblems(line: string, cli: Command = program): string[] {
  const words = line
    .replace(/\s+#.*$/, '')
    .trim()
    .split(/\s+/)
    .slice(1); // after `routelock`
  const problems: string[] = [];
  let command = cli;
  for (const word of words) {
    if (word.startsWith('-') || word.startsWith('<')) break;
    const sub = command.commands.find((c) => c.name() === word);
    if (!sub) {
      problems.push(`${line}: no command "${word}"`);
      return problems;
    }
    command = sub;
  }
  if (command.commands.length > 0) problems.push(`${line}: "${command.name()}" needs a subcommand`);
  for (const option of words.filter((w) => w.startsWith('--')))
    if (!command.options.some((o) => o.long === option || o.long === option.replace(/^--no-/, '--')))
      problems.push(`${line}: ${command.name()} has no option ${option}`);
  return problems;
}

/** What is wrong with one HTTP call: a path or method no endpoint declares. */
function httpProblems(line: string): string[] {
  const url = /\$ROUTELOCK_URL\/api\/([^"\s]+)/.exec(line)?.[1];
  if (url === undefined) return [`${line}: no $ROUTELOCK_URL/api/… URL`];
  const method = /-X\s+([A-Z]+)/.exec(line)?.[1] ?? 'GET';
  const segments = url.split('/');
  const matches = functionEndpoints.filter((e) => {
    const template = e.route.split('/');
    return (
      template.length === segments.length &&
      template.every((t, i) =>
        t.startsWith('{') ? /^<\w+>$/.test(segments[i] as string) : t === segments[i],
      )
    );
  });
  if (matches.length === 0) return [`${line}: no endpoint /api/${url}`];
  return matches.some((e) => e.methods.includes(method as never))
    ? []
    : [`${line}: /api/${url} does not take ${method}`];
}

function runbookProblems(section: string): { commands: number; calls: number; problems: string[] } {
  const lines = commandLines(section);
  const cli = lines.filter((l) => /^routelock /.test(l.trim()));
  const http = lines.filter((l) => /^(api|curl)\b/.test(l.trim()) && l.includes('$ROUTELOCK_URL'));
  return {
    commands: cli.length,
    calls: http.length,
    problems: [...cli.flatMap((l) => cliProblems(l.trim())), ...http.flatMap((l) => httpProblems(l.trim()))],
  };
}

test('every command and call in the Runbook exists', () => {
  const section = runbookSection(readme);
  const { commands, calls, problems } = runbookProblems(section);
  expect(commands).toBeGreaterThanOrEqual(10);
  expect(calls).toBeGreaterThanOrEqual(5);
  expect(problems).toEqual([]);
  // one subsection per alert (the alerts' links are checked in monitoring.test.ts)
  expect([...section.matchAll(/^### (.+)$/gm)].map((m) => m[1])).toEqual([
    'Write-lock hold p99 high',
    'Convergence shortfall',
    'Synthetic probe failing',
    'Migration stalled',
    'Orphaned locks',
    'Store throttling',
  ]);
});

test('negative controls: an unknown command, option, route or method is caught', () => {
  const planted = (line: string) => runbookProblems(`\n## Runbook\n\`\`\`bash\n${line}\n\`\`\`\n`).problems;
  expect(planted('routelock migration restart <migrationId>')).toEqual([
    'routelock migration restart <migrationId>: no command "restart"',
  ]);
  expect(planted('routelock campaign limits <campaignId> --max-parallel 10')).toEqual([
    'routelock campaign limits <campaignId> --max-parallel 10: limits has no option --max-parallel',
  ]);
  expect(planted('routelock migration')).toEqual(['routelock migration: "migration" needs a subcommand']);
  expect(planted('api -X POST "$ROUTELOCK_URL/api/ops/sweep"')).toEqual([
    'api -X POST "$ROUTELOCK_URL/api/ops/sweep": no endpoint /api/ops/sweep',
  ]);
  expect(planted('api "$ROUTELOCK_URL/api/ops/probe"')).toEqual([
    'api "$ROUTELOCK_URL/api/ops/probe": /api/ops/probe does not take GET',
  ]);
  // and the good forms pass
  expect(planted('routelock campaign limits <campaignId> --max-concurrent 10 --no-rate-limit')).toEqual([]);
  expect(planted('api -X POST "$ROUTELOCK_URL/api/ops/probe"')).toEqual([]);
});
