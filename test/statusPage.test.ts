import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { runDrill } from '../drill/drill';
import { startLocalHost } from '../local/host';

/**
 * The status page as a person sees it: Debian Chromium (headless, driven by playwright-core) opens `/`
 * on the embedded host during a drill, watches a migration appear and reach Completed, and saves a
 * screenshot under test-output/; and watches a running campaign's progress bar fill, follows its link to
 * its migrations, and saves a second screenshot.
 */

// `npm test`'s set-up step (scripts/ensure-browser.sh) provides it, installing Debian's package when missing.
const CHROMIUM = process.env.ROUTELOCK_CHROMIUM ?? '/usr/bin/chromium';
const outputDir = join(__dirname, '..', 'test-output');

function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run the tests with \`npm test\` (its pretest installs it)`);
  mkdirSync(outputDir, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

test('the status page shows a migration appear and complete during a drill', async () => {
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    let sawRunning = false;
    let shot: Promise<string> | undefined;
    const summary = await runDrill(
      { resources: 6, migrations: 3, rate: 30, duration: 8 },
      {
        onHost: (host) => {
          shot = (async () => {
            await page.goto(`${host.url}/`);
            await page.waitForSelector('tr[data-migration]', { timeout: 30_000 });
            sawRunning =
              (await page.locator('tr[data-status="Running"], tr[data-status="Pending"]').count()) > 0;
            await page.waitForSelector('tr[data-status="Completed"]', { timeout: 60_000 });
            const path = join(outputDir, 'status-page.png');
            await page.screenshot({ path, fullPage: true });
            return path;
          })();
        },
      },
    );
    expect(summary.violations).toEqual([]);
    const screenshot = await (shot as Promise<string>);
    expect(existsSync(screenshot)).toBe(true);
    expect(sawRunning).toBe(true);
    expect(await page.locator('#migrations .track .seg').count()).toBeGreaterThan(0);
    expect(await page.locator('h1').textContent()).toBe('routelock');
  } finally {
    await browser.close();
  }
}, 120_000);

test('the status page shows a running campaign with its progress bar, counts and ETA, and links to its migrations', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-status-campaign-'));
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_SQLITE_PATH: join(dir, 'state.db') },
    log: () => undefined,
  });
  const browser = await launchBrowser();
  try {
    const post = (path: string, body: unknown) =>
      fetch(`${host.url}/api${path}`, {
        method: path.startsWith('/routes/') ? 'PUT' : 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const ids = ['page-a', 'page-b', 'page-c', 'page-d'];
    for (const id of ids)
      expect((await post(`/routes/${id}`, { location: { region: 'westeurope' } })).status).toBe(201);
    // One at a time (dev timing: ~4 s each), so it is Running, part done, while the page is looked at.
    const created = await post('/campaigns', {
      campaignId: 'residency-eu',
      target: { region: 'eastus' },
      resources: ids,
      maxConcurrent: 1,
    });
    expect(created.status).toBe(202);

    // A migration of no campaign: the filtered view must leave it out.
    expect((await post('/routes/page-solo', { location: { region: 'westeurope' } })).status).toBe(201);
    const solo = { resourceId: 'page-solo', target: { region: 'eastus' }, migrationId: 'solo-1' };
    expect((await post('/migrations', solo)).status).toBe(202);

    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    await page.goto(`${host.url}/`);
    await page.waitForSelector('tr[data-migration="solo-1"]', { timeout: 30_000 });
    const row = page.locator('tr[data-campaign="residency-eu"]');
    await row.waitFor({ timeout: 30_000 });
    // Part done and still running: a filled segment, "1 / 4" or more ended, an ETA.
    await page.waitForSelector('tr[data-campaign="residency-eu"][data-status="Running"] .seg.moved', {
      timeout: 30_000,
    });
    expect(await row.locator('td.ended').textContent()).toMatch(/^[1-3] \/ 4$/);
    expect(await row.locator('td.counts').textContent()).toMatch(/completed [1-3]/);
    expect(await row.locator('td.eta').textContent()).toMatch(/\d+ (s|min)/);
    const width = await row
      .locator('.seg.moved')
      .evaluate((el) => parseFloat((el as unknown as { style: { width: string } }).style.width));
    expect(width).toBeGreaterThanOrEqual(25);
    expect(width).toBeLessThan(100);

    // Its migrations link filters the migrations table to the campaign's (GET /api/migrations?campaignId=).
    await row.locator('a.migrations').click();
    await page.waitForSelector('#migrationFilter:not([hidden])');
    // (A string: the page's DOM is not in this project's TypeScript lib.)
    await page.waitForFunction(
      `[...document.querySelectorAll('#migrations tr[data-migration]')].length > 0 &&
       [...document.querySelectorAll('#migrations tr[data-migration]')].every((r) => r.dataset.migration.startsWith('residency-eu.'))`,
      undefined,
      { timeout: 10_000 },
    );
    await page.screenshot({ path: join(outputDir, 'status-page-campaigns.png'), fullPage: true });
    expect(await page.locator('tr[data-migration="solo-1"]').count()).toBe(0);

    await page.waitForSelector('tr[data-campaign="residency-eu"][data-status="Completed"]', {
      timeout: 60_000,
    });
    expect(await row.locator('td.ended').textContent()).toBe('4 / 4');
    expect(await page.locator('#migrations tr[data-migration]').count()).toBe(4);
    expect(existsSync(join(outputDir, 'status-page-campaigns.png'))).toBe(true);

    // A hash that does not decode (`%`) is no filter: the page keeps refreshing and shows every migration.
    await page.evaluate(`location.hash = '#campaign=%'`);
    await page.waitForFunction(
      `document.getElementById('migrationFilter').hidden &&
       document.querySelector('#migrations tr[data-migration="solo-1"]') !== null &&
       document.getElementById('updated').textContent.startsWith('updated ')`,
      undefined,
      { timeout: 10_000 },
    );
  } finally {
    await browser.close();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
