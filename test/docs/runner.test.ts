import { mkdtempSync, rmSync } from 'node:fs';
import { type Server, createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BlockResult, extractBlocks, outputMismatch, runPass } from '../support/docExamples';

/**
 * The doc test's runner fails what it must (a failing command, a problem the text does not promise, a
 * broken promise, output that differs, a URL off this machine) and passes the same examples made right.
 * A stand-in server answers as routelock does: 200 JSON, or a 409 problem.
 */

const repo = join(__dirname, '../..');
let server: Server;
let port: number;
let work: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'routelock-runner-'));
  server = createServer((req, res) => {
    if (req.url === '/api/ok') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end('{"status":"Running","at":"2026-12-05T10:00:00.000Z"}');
    } else {
      res
        .writeHead(409, { 'content-type': 'application/problem+json' })
        .end('{"type":"about:blank","title":"Campaign ended","status":409,"code":"CampaignEnded"}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(work, { recursive: true, force: true });
});

let runs = 0;
async function run(markdown: string): Promise<BlockResult[]> {
  runs += 1;
  return runPass(extractBlocks(markdown, 'fake.md'), { repo, work, port, timeoutMs: 60_000 }, `run-${runs}`);
}

const sh = (code: string, info = '') => `\`\`\`sh${info ? ` ${info}` : ''}\n${code}\n\`\`\`\n`;
const setup = sh('A=http://127.0.0.1:${PORT:-7071}/api\ncurl -s $A/ok');
const states = (results: BlockResult[]) => results.map((r) => r.state);

test('a document that works passes, its variables carried from block to block', async () => {
  const results = await run(`# Fake\n\n${setup}\nText.\n\n${sh('echo "$A" | grep 127.0.0.1')}`);
  expect(states(results)).toEqual(['passed', 'passed']);
  expect(results[0]?.stdout).toContain('"status":"Running"');
});

test('a command that exits non-zero fails its block, and the blocks after it do not run', async () => {
  const results = await run(`${setup}${sh('echo before\nfalse\necho after')}${sh('echo later')}`);
  expect(states(results)).toEqual(['passed', 'failed', 'not run']);
  expect(results[1]?.stdout).toBe('before\n');
  expect(results[1]?.problem).toMatch(/exited/);
});

test('a problem the text does not promise fails; the same line with its promise passes', async () => {
  const pause = 'curl -s -X POST $A/campaigns/c-1/pause';
  expect(states(await run(`${setup}${sh(pause)}`))).toEqual(['passed', 'failed']);
  expect(states(await run(`${setup}${sh(`X=$(${pause})`)}`))).toEqual(['passed', 'failed']);
  expect(states(await run(`${setup}${sh(`${pause} | head -c 20`)}`))).toEqual(['passed', 'failed']);
  expect(states(await run(`${setup}${sh(`${pause}   # expect: 409 CampaignEnded`)}`))).toEqual([
    'passed',
    'passed',
  ]);
  expect(states(await run(`${setup}${sh(`${pause}   # expect: 409`)}`))).toEqual(['passed', 'passed']);
});

test('a promise the answer does not keep fails', async () => {
  expect(states(await run(`${setup}${sh('curl -s -X POST $A/c/pause   # expect: 404')}`))).toEqual([
    'passed',
    'failed',
  ]);
  expect(states(await run(`${setup}${sh('curl -s -X POST $A/c/pause   # expect: 409 NotFound')}`))).toEqual([
    'passed',
    'failed',
  ]);
  expect(states(await run(`${setup}${sh('curl -s $A/ok   # expect: 409')}`))).toEqual(['passed', 'failed']);
});

test('an exit promised is checked: kept passes, broken fails', async () => {
  expect(states(await run(sh("bash -c 'exit 4'   # expect: exit 4\necho on")))).toEqual(['passed']);
  expect(states(await run(sh("bash -c 'exit 3'   # expect: exit 4")))).toEqual(['failed']);
  expect(states(await run(sh('true   # expect: exit 1')))).toEqual(['failed']);
});

test('shown output is compared leniently: times and numbers masked, a different word fails', async () => {
  const shown = (text: string) => `${setup}\n\`\`\`text\n${text}\n\`\`\`\n`;
  expect(states(await run(shown('{"status":"Running","at":"2027-01-01T00:00:00.000Z"}')))).toEqual([
    'passed',
  ]);
  const results = await run(shown('{"status":"Completed"}'));
  expect(states(results)).toEqual(['failed']);
  expect(results[0]?.problem).toMatch(/lacks the line shown/);
  expect(outputMismatch('a\n...\nc', 'a\nb\nc')).toBeUndefined();
  expect(outputMismatch('c\na', 'a\nb\nc')).toBe('a');
  expect(outputMismatch('..."status":"Done"...', '{"id":1,"status":"Done","n":2}')).toBeUndefined();
  expect(outputMismatch('..."n":2..."status":"Done"', '{"id":1,"status":"Done","n":2}')).toBeDefined();
});

test('a URL off this machine fails the document before anything runs', async () => {
  const results = await run(`${sh('echo ran > ran.txt')}${sh('curl -s https://example.com/x')}`);
  expect(states(results)).toEqual(['not run', 'failed']);
  expect(results[1]?.problem).toMatch(/off this machine: https:\/\/example\.com/);
});

test('marked blocks are skipped with their reason; an unknown marker or info string is refused', async () => {
  const results = await run(
    `${sh('exit 1', 'doc:azure needs an Azure subscription')}${sh('npm ci', 'doc:install')}`,
  );
  expect(results.map((r) => [r.state, r.block.reason])).toEqual([
    ['skipped', 'needs an Azure subscription'],
    ['skipped', expect.stringMatching(/installs dependencies/)],
  ]);
  expect(() => extractBlocks(sh('x', 'doc:later'), 'f.md')).toThrow(/unknown marker doc:later/);
  expect(() => extractBlocks(sh('x', 'title="x"'), 'f.md')).toThrow(/info string/);
});

test('npm and the network: npm is offline and other hosts go to a dead proxy', async () => {
  const results = await run(sh('[ "$npm_config_offline" = true ]\n[ "$https_proxy" = http://127.0.0.1:9 ]'));
  expect(states(results)).toEqual(['passed']);
});
