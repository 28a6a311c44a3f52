import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page, chromium } from 'playwright-core';
import { type LocalHost } from '../local/host';
import { startLocalHost } from './support/localHost';

/**
 * The status page with more routes than one page of GET /routes (207 > 200): every route listed and
 * found by the search, the count said; its icon served; no chart tick between whole counts; and at a
 * phone's 420 px nothing wider than the screen but the tables' own scrolling boxes. Screenshots at
 * 1280 px and 420 px under test-output/.
 */

const CHROMIUM = process.env.ROUTELOCK_CHROMIUM ?? '/usr/bin/chromium';
const outputDir = join(__dirname, '..', 'test-output');

async function until(page: Page, expression: string, timeout = 15_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await page.evaluate(expression)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let dir: string;
let host: LocalHost;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run the tests with \`npm test\` (its pretest installs it)`);
  mkdirSync(outputDir, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), 'routelock-status-lists-'));
  host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'state.db') },
    log: () => undefined,
  });
  for (let i = 0; i < 207; i += 1) {
    const id = `many-${String(i).padStart(3, '0')}`;
    const put = await fetch(`${host.url}/api/routes/${id}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ location: { region: 'westeurope' } }),
    });
    if (put.status !== 201) throw new Error(`PUT ${id}: ${put.status}`);
  }
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await host?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('207 routes: every one listed and searchable, the count said; the icon is served', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const missing: string[] = [];
  page.on('response', (r) => {
    if (r.status() === 404) missing.push(r.url());
  });
  await page.goto(`${host.url}/api/status`);
  await until(page, "document.querySelectorAll('#routes tr[data-resource]').length === 207");
  expect(await page.textContent('#routeCount')).toBe('207 routes');
  // the last ones, past the first page of 200, are found by the search
  await page.goto(`${host.url}/api/status#resource=many-206`);
  await until(page, "document.querySelectorAll('#routes tr[data-resource]').length === 1");
  expect(await page.getAttribute('#routes tr[data-resource]', 'data-resource')).toBe('many-206');
  expect(await page.textContent('#routeCount')).toBe('207 routes, 1 shown');
  const icon = await fetch(`${host.url}/api/ops/view/assets/favicon.svg`);
  expect(icon.status).toBe(200);
  expect(icon.headers.get('content-type')).toBe('image/svg+xml');
  expect(missing).toEqual([]);
  await page.goto(`${host.url}/api/status`);
  await until(page, "document.querySelectorAll('#routes tr[data-resource]').length === 207");
  await page.screenshot({ path: join(outputDir, 'status-page-1280.png') });
  await page.close();
}, 60_000);

test('at 420 px the page is no wider than the screen: tables scroll in their own boxes', async () => {
  const page = await browser.newPage({ viewport: { width: 420, height: 900 } });
  await page.goto(`${host.url}/api/status`);
  await until(page, "document.querySelectorAll('#routes tr[data-resource]').length === 207");
  expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(420);
  // each table sits in a box that scrolls sideways rather than pushing the page wider
  expect(
    await page.evaluate(
      "[...document.querySelectorAll('table:not(.u-legend)')].every((t) => getComputedStyle(t.parentElement).overflowX === 'auto')",
    ),
  ).toBe(true);
  await page.screenshot({ path: join(outputDir, 'status-page-420.png'), fullPage: true });
  await page.close();
}, 60_000);

test("a campaign whose members were all skipped: its migrations view says how many and why, not 'no match'", async () => {
  const post = await fetch(`${host.url}/api/campaigns`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      campaignId: 'c-gone',
      target: { region: 'eastus' },
      resources: ['gone-1', 'gone-2'],
    }),
  });
  expect(post.status).toBe(202);
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    const s = (await (await fetch(`${host.url}/api/campaigns/c-gone`)).json()) as { status: string };
    if (s.status === 'Completed') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${host.url}/api/status#campaign=c-gone`);
  await until(page, "!!document.querySelector('#noMigrations')");
  expect(await page.textContent('#noMigrations')).toBe(
    'Campaign c-gone: 2 member(s) never started, skipped: NotFound 2.',
  );
  await page.close();
}, 60_000);

test('an open tab asks for the migrations page each second, and the lists only every 5 s', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${host.url}/api/status`);
  await until(page, "document.querySelectorAll('#routes tr[data-resource]').length === 207");
  const asked: string[] = [];
  page.on('request', (r) => asked.push(new URL(r.url()).pathname));
  await new Promise((r) => setTimeout(r, 4000));
  await page.close();
  const count = (path: string) => asked.filter((p) => p === `/api/ops/view/${path}`).length;
  expect(count('migrations')).toBeGreaterThanOrEqual(2);
  // 207 routes are two pages: at most one round of them in 4 s (a second each would be 8)
  expect(count('routes')).toBeLessThanOrEqual(2);
  expect(count('campaigns')).toBeLessThanOrEqual(1);
}, 60_000);
