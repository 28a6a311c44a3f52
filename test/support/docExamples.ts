/**
 * The doc test's runner: every `sh` block of a Markdown document, in order, as written, with bash.
 *
 * The conventions a document follows (the guides state none of this; a reader just pastes):
 * - A block's info string may carry one marker; the runner skips the block and prints why:
 *   `doc:host` starts a long-running host (the test starts the host itself, in the background),
 *   `doc:install` installs dependencies (this checkout's are installed, and the test stays offline),
 *   `doc:azure <why>` needs Azure, azd or Core Tools, `doc:slow <why>` runs the test suite, verify, the
 *   benchmarks or the drill. Anything after the marker is the reason printed; any other `doc:` word fails.
 * - A command that is meant to fail says so on its line: `# expect: 409 CampaignEnded` (the HTTP status
 *   and, optionally, the problem's `code`) for a `curl`, `# expect: exit 4` for any command. Without it,
 *   a command that exits non-zero, and a `curl` answered with HTTP >= 400 or `application/problem+json`,
 *   fails the document. With it, any other outcome fails it (the promise is checked too).
 * - A `text` block right after a `sh` block (nothing but blank lines between) is that block's expected
 *   output. It is compared leniently: numbers, times, ids and tokens are masked, each expected line must
 *   appear in the output in order, and `...` stands for anything (a whole line, or within one).
 * - No block may name a URL that is not on this machine (checked before anything runs); the shell gets a
 *   dead loopback proxy and npm runs offline, so nothing reaches the network anyway.
 *
 * The blocks of one pass run in one bash process (`set -Eeo pipefail`), so a variable a block sets is
 * there in the next, as in the reader's shell; a second pass starts a new shell, as a reader coming back
 * would. The shell's working directory is a scratch copy of the checkout (its top-level entries linked,
 * without `.routelock/`, `.deploy/`, `dist/` or `.git`), so a block that writes a file writes it there.
 */
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

export type Marker = 'host' | 'install' | 'azure' | 'slow';

export interface DocBlock {
  file: string;
  /** 1-based line of the block's first line of code. */
  line: number;
  code: string;
  marker?: Marker;
  reason?: string;
  /** The `text` block shown after it: its expected output. */
  output?: string;
}

const defaultReasons: Record<Marker, string> = {
  host: 'starts a long-running host: the test starts the embedded host itself, in the background',
  install: "installs dependencies: this checkout's are installed, and the test stays offline",
  azure: 'needs Azure',
  slow: 'runs a long suite',
};

const fence = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)\s*(.*)$/;

/** The `sh` blocks of a Markdown document, in order, with their markers and expected output. */
export function extractBlocks(markdown: string, file: string): DocBlock[] {
  const lines = markdown.split('\n');
  const blocks: DocBlock[] = [];
  let last: { block: DocBlock | undefined; endLine: number } = { block: undefined, endLine: -2 };
  for (let i = 0; i < lines.length; i++) {
    const open = fence.exec(lines[i] as string);
    if (!open) continue;
    const [, indent = '', marks = '', lang = '', info = ''] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j] as string;
      if (line.trim().startsWith(marks) && line.trim().replace(/[`~]/g, '') === '') break;
      body.push(line.startsWith(indent) ? line.slice(indent.length) : line.trimStart());
    }
    const between = lines.slice(last.endLine + 1, i);
    if (lang === 'sh' || lang === 'bash') {
      const block: DocBlock = { file, line: i + 2, code: body.join('\n') };
      const mark = /^doc:(\S+)\s*(.*)$/.exec(info.trim());
      if (mark) {
        const name = mark[1] as string;
        if (!(name in defaultReasons)) throw new Error(`${file}:${i + 1}: unknown marker doc:${name}`);
        block.marker = name as Marker;
        block.reason = (mark[2] as string).trim() || defaultReasons[block.marker];
      } else if (info.trim()) {
        throw new Error(
          `${file}:${i + 1}: an sh block's info string is a doc: marker or nothing ("${info}")`,
        );
      }
      blocks.push(block);
      last = { block, endLine: j };
    } else {
      if (lang === 'text' && last.block && between.every((l) => l.trim() === '')) {
        last.block.output = body.join('\n');
      }
      last = { block: undefined, endLine: j };
    }
    i = j;
  }
  return blocks;
}

const loopbackHosts = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** URLs a block names that are not on this machine. */
export function remoteUrls(code: string): string[] {
  return [...code.matchAll(/\bhttps?:\/\/([^/\s'"`:)]+|\[[^\]]+\])/g)]
    .filter((m) => !loopbackHosts.has(m[1] as string) && !/^127\./.test(m[1] as string))
    .map((m) => m[0]);
}

/** Quote state at the end of a line: whether a string opened on it is still open. */
function scanQuotes(line: string, state: { quote: '' | "'" | '"' }): void {
  for (let k = 0; k < line.length; k++) {
    const c = line[k];
    if (state.quote === "'") {
      if (c === "'") state.quote = '';
    } else if (state.quote === '"') {
      if (c === '\\') k++;
      else if (c === '"') state.quote = '';
    } else if (c === '\\') k++;
    else if (c === "'" || c === '"') state.quote = c;
    else if (c === '#' && (k === 0 || /\s/.test(line[k - 1] as string))) return;
  }
}

const expectComment = /#\s*expect:\s*(?:exit\s+(\d+)|(\d{3})(?:\s+([A-Za-z]+))?)/;

/**
 * A block's code with its `# expect:` promises turned into checks. Returns the lines to run and, for
 * each, the document line it came from (0 for the runner's own).
 */
export function instrument(block: DocBlock): { lines: string[]; origin: number[] } {
  const src = block.code.split('\n');
  const lines: string[] = [];
  const origin: number[] = [];
  const emit = (text: string, from: number) => {
    lines.push(text);
    origin.push(from);
  };
  let heredoc: string | undefined;
  for (let i = 0; i < src.length;) {
    if (heredoc !== undefined) {
      if ((src[i] as string).trim() === heredoc) heredoc = undefined;
      emit(src[i] as string, block.line + i);
      i++;
      continue;
    }
    // one logical line: continued by a trailing \, |, && or ||, or an open quote
    const start = i;
    const state = { quote: '' as '' | "'" | '"' };
    for (;;) {
      const line = src[i] as string;
      scanQuotes(line, state);
      i++;
      if (i >= src.length) break;
      if (state.quote) continue;
      if (/(\\|\||&&)\s*$/.test(line.replace(/\s+#.*$/, ''))) continue;
      break;
    }
    const logical = src.slice(start, i);
    const text = logical.join('\n');
    const doc = /<<-?\s*['"]?(\w+)['"]?/.exec(text);
    if (doc) heredoc = doc[1];
    const promise = expectComment.exec(text);
    const at = (k: number) => block.line + start + k;
    if (promise?.[1] !== undefined) {
      const code = promise[1];
      emit('set +e', 0);
      logical.forEach((l, k) => emit(l, at(k)));
      emit(
        `__rc=$?; set -e; [ "$__rc" = ${code} ] || __broken "expected exit ${code}, got exit $__rc"`,
        at(logical.length - 1),
      );
    } else if (promise?.[2] !== undefined) {
      emit(`__EXPECT='${promise[2]}${promise[3] ? ` ${promise[3]}` : ''}'`, 0);
      logical.forEach((l, k) => emit(l, at(k)));
      emit(`__EXPECT=''`, 0);
    } else {
      logical.forEach((l, k) => emit(l, at(k)));
    }
  }
  return { lines, origin };
}

/** Bash run before the first block: the checks on curl and the offline npm install. */
const prelude = String.raw`set -Eeo pipefail
__EXPECT=''
__broken() { printf 'doc-test: %s\n' "$*" >&2; return 97; }
trap 'printf "doc-test: exit %s at script line %s: %s\n" "$?" "$LINENO" "$BASH_COMMAND" >&2' ERR
__REAL_CURL=$(command -v curl)
# curl as written, its answer checked: an error status or a problem is a failure unless the line promises it
curl() {
  local h b rc status ctype code shell_opts=$-
  h=$(mktemp); b=$(mktemp)
  set +e
  "$__REAL_CURL" -D "$h" "$@" | tee "$b"
  rc=${'$'}{PIPESTATUS[0]}
  [[ $shell_opts == *e* ]] && set -e
  status=$(awk '/^HTTP\//{s=$2} END{print s}' "$h")
  ctype=$(grep -i '^content-type:' "$h" | tail -n 1 | tr -d '\r' | cut -d: -f2- | tr -d ' ' || true)
  code=$(grep -o '"code":"[A-Za-z]*"' "$b" | head -n 1 | cut -d'"' -f4 || true)
  # 23: the reader (grep, head) closed the pipe after what it wanted; the answer had come
  if [ "$rc" != 0 ] && ! { [ "$rc" = 23 ] && [ -n "$status" ]; }; then
    __broken "curl exited $rc (no answer): curl $*"; return $rc
  fi
  if [ -n "$__EXPECT" ]; then
    local want_status want_code
    read -r want_status want_code <<<"$__EXPECT"
    if [ "$status" != "$want_status" ] || { [ -n "$want_code" ] && [ "$code" != "$want_code" ]; }; then
      __broken "the line promises $__EXPECT, the answer was $status $code: curl $*"; return 22
    fi
  elif [ "${'$'}{status:-0}" -ge 400 ] || [[ ${'$'}{ctype,,} == application/problem+json* ]]; then
    __broken "unexpected answer $status $code to curl $* — $(head -c 400 "$b")"; return 22
  fi
  rm -f "$h" "$b"
  return 0
}
# Offline, npm cannot fetch what a packed tarball depends on: copy it from this checkout's node_modules
# first, as test/package does (npm keeps an installed package that satisfies the range).
npm() {
  if [ "${'$'}{1:-}" = install ]; then
    local arg dep
    for arg in "${'$'}{@:2}"; do
      [[ $arg == *.tgz && -f $arg ]] || continue
      for dep in $(tar -xzOf "$arg" package/package.json | node -pe 'Object.keys(JSON.parse(require("fs").readFileSync(0)).dependencies ?? {}).join(" ")'); do
        [ -e "node_modules/$dep" ] || { mkdir -p "node_modules/$(dirname "$dep")"; cp -R "$__REPO/node_modules/$dep" "node_modules/$dep"; }
      done
    done
  fi
  command npm "$@"
}
`;

export interface BlockResult {
  block: DocBlock;
  state: 'passed' | 'skipped' | 'failed' | 'not run';
  stdout: string;
  stderr: string;
  problem?: string;
}

export interface RunOptions {
  /** The repository's root. */
  repo: string;
  /** A temporary directory the runner owns. */
  work: string;
  /** The port the embedded host listens on (the shell's PORT). */
  port: number;
  /** A whole pass's limit. */
  timeoutMs?: number;
}

/** A scratch copy of the checkout: its top-level entries linked, none of its data or build output. */
export function scratchCheckout(repo: string, dir: string): string {
  mkdirSync(dir, { recursive: true });
  const leave = new Set(['.git', '.routelock', '.deploy', 'dist', '.azurite', 'local.settings.json']);
  for (const entry of readdirSync(repo)) {
    if (!leave.has(entry) && !existsSync(join(dir, entry))) symlinkSync(join(repo, entry), join(dir, entry));
  }
  return dir;
}

/** Whether `parts` occur in `line` in this order, anything between them. */
function inOrder(line: string, parts: string[]): boolean {
  let at = 0;
  for (const part of parts) {
    const found = line.indexOf(part, at);
    if (found < 0) return false;
    at = found + part.length;
  }
  return true;
}

/** Lines the expected output has that the actual lacks, in order, after masking. */
export function outputMismatch(expected: string, actual: string): string | undefined {
  const mask = (s: string) =>
    s
      .replace(/\d{4}-\d\d-\d\dT[\d:.]+Z?/g, '<time>')
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, '<uuid>')
      .replace(/[A-Za-z0-9_-]{40,}/g, '<token>')
      .replace(/\d+(\.\d+)?/g, '#')
      .replace(/\s+/g, ' ')
      .trim();
  const have = actual.split('\n').map(mask);
  let from = 0;
  for (const line of expected.split('\n').map(mask)) {
    if (line === '' || line === '...') continue;
    const parts = line
      .split('...')
      .map((p) => p.trim())
      .filter(Boolean);
    const found = have.findIndex((h, k) => k >= from && inOrder(h, parts));
    if (found < 0) return line;
    from = found + 1;
  }
  return undefined;
}

/**
 * Run every block of `blocks` once, in one new bash: skipped blocks skipped, the rest run, output
 * compared. Resolves with one result per block; never throws for a failing block.
 */
export async function runPass(blocks: DocBlock[], options: RunOptions, pass: string): Promise<BlockResult[]> {
  const dir = join(options.work, pass);
  const out = join(dir, 'out');
  const home = join(options.work, 'home');
  const tmp = join(options.work, 'tmp');
  const bin = join(options.work, 'bin');
  for (const d of [out, home, tmp, bin]) mkdirSync(d, { recursive: true });
  const cwd = scratchCheckout(options.repo, join(options.work, 'checkout'));
  const shim = join(bin, 'routelock');
  writeFileSync(shim, `#!/bin/sh\nexec node "${options.repo}/bin/routelock.js" "$@"\n`);
  chmodSync(shim, 0o755);

  const script: string[] = [prelude];
  const origin: number[] = prelude.split('\n').map(() => 0);
  const push = (line: string, from = 0) => {
    for (const l of line.split('\n')) {
      script.push(l);
      origin.push(from);
    }
  };
  const results: BlockResult[] = blocks.map((block) => ({
    block,
    state: block.marker ? 'skipped' : 'not run',
    stdout: '',
    stderr: '',
  }));
  blocks.forEach((block, n) => {
    if (block.marker) return;
    const remote = remoteUrls(block.code);
    if (remote.length) {
      const result = results[n] as BlockResult;
      result.state = 'failed';
      result.problem = `names a URL off this machine: ${remote.join(', ')}`;
      return;
    }
    push(`echo ${n} > "$__OUT/current"`);
    push('{');
    const { lines, origin: from } = instrument(block);
    lines.forEach((l, k) => push(l, from[k]));
    push(`} >"$__OUT/${n}.out" 2>"$__OUT/${n}.err"`);
    push(`echo ${n} >> "$__OUT/done"`);
  });
  if (results.some((r) => r.state === 'failed')) return results;
  // script lines are 1-based
  const scriptFile = join(dir, 'blocks.sh');
  writeFileSync(scriptFile, `${script.join('\n')}\n`);

  const env: Record<string, string> = {
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    HOME: home,
    TMPDIR: tmp,
    LANG: 'C.UTF-8',
    PORT: String(options.port),
    __OUT: out,
    __REPO: options.repo,
    // nothing reaches the network: a dead proxy for anything but this machine, npm offline
    http_proxy: 'http://127.0.0.1:9',
    https_proxy: 'http://127.0.0.1:9',
    HTTP_PROXY: 'http://127.0.0.1:9',
    HTTPS_PROXY: 'http://127.0.0.1:9',
    no_proxy: '127.0.0.1,localhost,::1',
    NO_PROXY: '127.0.0.1,localhost,::1',
    npm_config_offline: 'true',
    npm_config_cache: join(options.work, 'npm-cache'),
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
  };
  const child = spawn('bash', [scriptFile], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout.on('data', () => undefined);
  const timeout = options.timeoutMs ?? 300_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      /* already gone */
    }
  }, timeout);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);

  const read = (f: string) => (existsSync(join(out, f)) ? readFileSync(join(out, f), 'utf8') : '');
  const done = new Set(read('done').split('\n').filter(Boolean).map(Number));
  const current = Number(read('current').trim() || -1);
  const toDoc = (text: string) =>
    text.replace(/script line (\d+)/g, (all, n: string) => {
      const from = origin[Number(n) - 1];
      return from ? `${blocks[0]?.file ?? ''}:${from}` : all;
    });
  results.forEach((result, n) => {
    if (result.state === 'skipped') return;
    result.stdout = read(`${n}.out`);
    result.stderr = toDoc(read(`${n}.err`));
    if (done.has(n)) {
      result.state = 'passed';
      const mismatch = result.block.output && outputMismatch(result.block.output, result.stdout);
      if (mismatch) {
        result.state = 'failed';
        result.problem = `its output lacks the line shown: ${mismatch}`;
      }
    } else if (n === current) {
      result.state = 'failed';
      result.problem = timedOut
        ? `timed out after ${timeout / 1000} s`
        : `exited ${code}${stderr ? `: ${toDoc(stderr).trim().split('\n').slice(-3).join(' | ')}` : ''}`;
    }
  });
  return results;
}

/** One line per block that did not pass, for a test's failure message. */
export function describeFailures(results: BlockResult[]): string {
  return results
    .filter((r) => r.state === 'failed')
    .map(
      (r) =>
        `${r.block.file}:${r.block.line}: ${r.problem ?? 'failed'}\n--- block ---\n${r.block.code}\n` +
        `--- stdout ---\n${r.stdout.slice(-2000)}\n--- stderr ---\n${r.stderr.slice(-2000)}`,
    )
    .join('\n\n');
}
