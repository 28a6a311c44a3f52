import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { runDrill } from '../drill/drill';

/**
 * The status page as a person sees it: Debian Chromium (headless, driven by playwright-core) opens `/`
 * on the embedded host during a drill, watches a migration appear and reach Completed, and saves a
 * screenshot under test-output/.
 */

// `npm test`'s set-up step (scripts/ensure-browser.sh) provides it, installing Debian's package when missing.
const CHROMIUM = process.env.ROUTELOCK_CHROMIUM ?? '/usr/bin/chromium';
const outputDir = join(__dirname, '..', 'test-output');

test('the status page shows a migration appear and complete during a drill', async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: run the tests with \`npm test\` (its pretest installs it)`);
  mkdirSync(outputDir, { recursive: true });
  const browser = await chromium.launch({
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
