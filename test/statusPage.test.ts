import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';
import { runDrill } from '../drill/drill';
import { startLocalHost } from './support/localHost';
import { SqliteStore } from '../shared/core/store/sqlite/locations';
import { asPrincipal } from './support/principals';

/**
 * The status page as a person sees it: Debian Chromium (headless, driven by playwright-core) opens `/`
 * on the embedded host (sent on to GET /api/status) during a drill, watches a migration appear and reach
 * Completed, and saves a screenshot under test-output/; watches a running campaign's progress bar fill,
 * follows its link to its migrations, and saves a second screenshot; and works the operator's views —
 * filters, paging, search, both uPlot charts drawn, the audit trail, a failed migration's reason and
 * where its bar stopped — with no Content-Security-Policy violation, and saves a third.
 */

// `npm test`'s set-up step (scripts/ensure-browser.sh) provides it, installing Debian's package when missing.
const CHROMIUM = process.env.ROUTELOCK_CHROMIUM ?? '/usr/bin/chromium';
const outputDir = join(__dirname, '..', 'test-output');

/**
 * Wait until `expression` (page JavaScript, a string: the page's DOM is not in this project's TypeScript
 * lib) is true. Polled from here with page.evaluate: playwright's own waitForFunction polls with eval
 * inside the page, which the page's Content-Security-Policy (rightly) refuses.
 */
async function until(page: Page, expression: string, timeout = 10_000): Promise<void> {
  const deadline = Date.now() + timeout;
  for (;;) {
    if (await page.evaluate(expression)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeout} ms waiting for ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

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
    await until(
      page,
      `[...document.querySelectorAll('#migrations tr[data-migration]')].length > 0 &&
       [...document.querySelectorAll('#migrations tr[data-migration]')].every((r) => r.dataset.migration.startsWith('residency-eu.'))`,
      10_000,
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
    await until(
      page,
      `document.getElementById('migrationFilter').hidden &&
       document.querySelector('#migrations tr[data-migration="solo-1"]') !== null &&
       document.getElementById('updated').textContent.startsWith('updated ')`,
      10_000,
    );
  } finally {
    await browser.close();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

/** Pixels of a canvas inside `selector` that are not transparent, and those of one colour (r,g,b ±12). */
async function canvasPixels(
  page: Page,
  selector: string,
  rgb: [number, number, number],
): Promise<{ painted: number; colour: number }> {
  return page.evaluate(
    `(() => {
      const canvas = document.querySelector(${JSON.stringify(selector)} + ' canvas');
      if (!canvas) return { painted: 0, colour: 0 };
      const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0, colour = 0;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3] === 0) continue;
        painted++;
        if (Math.abs(data[i] - ${rgb[0]}) < 13 && Math.abs(data[i + 1] - ${rgb[1]}) < 13 && Math.abs(data[i + 2] - ${rgb[2]}) < 13) colour++;
      }
      return { painted, colour };
    })()`,
  );
}

test("the operator's views: filters, paging, search, charts, the audit trail and a failed migration's reason", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'routelock-status-ops-'));
  const host = await startLocalHost({
    env: {
      PORT: '0',
      ROUTELOCK_SQLITE_PATH: join(dir, 'state.db'),
      ROUTELOCK_MIGRATION_ATTEMPTS: '1',
      ROUTELOCK_PARTICIPANTS: JSON.stringify([{ name: 'messages', url: 'https://messages.test/migrate' }]),
    },
    log: () => undefined,
    // The participant answers in-process: it refuses one resource's delta copy (a 422 fails the attempt).
    http: async (c) =>
      c.body.resourceId === 'ops-fail' && c.body.step === 'deltaCopy'
        ? { status: 422, body: { error: 'delta copy refused by messages' } }
        : c.body.step === 'verify'
          ? { status: 200, body: { match: true, sourceCount: 1, targetCount: 1 } }
          : { status: 200, body: null },
  });
  const browser = await launchBrowser();
  try {
    const api = (path: string, method = 'GET', body?: unknown) =>
      fetch(`${host.url}/api${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const east = ['ops-0', 'ops-1', 'ops-2', 'ops-fail'];
    for (const id of [...east, 'ops-west'])
      expect((await api(`/routes/${id}`, 'PUT', { location: { region: 'westeurope' } })).status).toBe(201);
    for (const id of east)
      expect(
        (
          await api('/migrations', 'POST', {
            resourceId: id,
            target: { region: 'eastus' },
            migrationId: `m-${id}`,
          })
        ).status,
      ).toBe(202);
    expect(
      (
        await api('/migrations', 'POST', {
          resourceId: 'ops-west',
          target: { region: 'westus' },
          migrationId: 'm-ops-west',
        })
      ).status,
    ).toBe(202);
    // all five ended (dev timing: a few seconds each, side by side)
    for (let i = 0; i < 120; i++) {
      const list = (await (await api('/migrations?limit=10')).json()) as { items: { status: string }[] };
      if (
        list.items.length === 5 &&
        list.items.every((m) => m.status !== 'Running' && m.status !== 'Pending')
      )
        break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const failed = (await (await api('/migrations/m-ops-fail')).json()) as { status: string };
    expect(failed.status).toBe('Failed');

    const page = await browser.newPage({ viewport: { width: 1360, height: 1000 } });
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    const opened = await page.goto(`${host.url}/`);
    expect(new URL(opened!.url()).pathname).toBe('/api/status');
    expect(opened!.headers()['content-security-policy']).toMatch(/^default-src 'none'/);
    await page.waitForSelector('tr[data-migration="m-ops-fail"]', { timeout: 30_000 });

    // a failed migration: why and where it stopped, and its bar ends in a stop mark
    const failedRow = page.locator('tr[data-migration="m-ops-fail"]');
    expect(await failedRow.getAttribute('data-status')).toBe('Failed');
    expect(await failedRow.locator('td.why').textContent()).toMatch(
      /^failed in write lock: ParticipantFailed — participant messages answered 422 to deltaCopy .*refused/,
    );
    expect(await failedRow.locator('.track .stop').count()).toBe(1);
    expect(await failedRow.locator('.track .seg').count()).toBeGreaterThan(0);
    expect(await page.locator('tr[data-migration="m-ops-0"] .track .stop').count()).toBe(0);

    // both charts drawn by uPlot: histogram bars in the write-lock colour, points on the time chart
    await until(page, `document.getElementById('holdCount').textContent.startsWith('4 swapped')`, 15_000);
    const hold = await canvasPixels(page, '#holdChart', [232, 104, 90]);
    expect(hold.colour).toBeGreaterThan(50);
    const time = await canvasPixels(page, '#timeChart', [47, 158, 110]);
    expect(time.painted).toBeGreaterThan(0);
    expect(time.colour).toBeGreaterThan(0);

    // the audit trail of a resource, rendered in the page
    await page.locator('tr[data-migration="m-ops-0"] a.audit').click();
    await page.waitForSelector('#auditSection:not([hidden]) tr[data-audit-op="swap"]', { timeout: 10_000 });
    expect(await page.locator('#auditOf').textContent()).toBe('ops-0');
    await page.screenshot({ path: join(outputDir, 'status-page-operator.png'), fullPage: true });
    await page.locator('#closeAudit').click();
    await page.waitForSelector('#auditSection[hidden]', { state: 'attached' });

    const shown = () =>
      page.evaluate(
        `[...document.querySelectorAll('#migrations tr[data-migration]')].map((r) => r.dataset.migration)`,
      ) as Promise<string[]>;
    const settle = async (expected: string[]) =>
      until(
        page,
        `JSON.stringify([...document.querySelectorAll('#migrations tr[data-migration]')].map((r) => r.dataset.migration).sort()) === ${JSON.stringify(JSON.stringify([...expected].sort()))}`,
        10_000,
      );

    // filters: status (the API's), region (within the page), resource id search (the API's)
    await page.selectOption('#f-status', 'Failed');
    await settle(['m-ops-fail']);
    await page.selectOption('#f-status', '');
    await settle(['m-ops-0', 'm-ops-1', 'm-ops-2', 'm-ops-fail', 'm-ops-west']);
    await page.fill('#f-region', 'westus');
    await page.click('#apply');
    await settle(['m-ops-west']);
    await page.click('#clear');
    await page.fill('#f-resource', 'ops-1');
    await page.click('#apply');
    await settle(['m-ops-1']);
    expect(await page.locator('#migrationFilter').textContent()).toContain('resource ops-1');
    await page.click('#clear');

    // paging with the API's continuation: 2 a page, newest first, nothing twice, nothing skipped
    await page.fill('#f-size', '2');
    await page.click('#apply');
    await until(page, `document.querySelectorAll('#migrations tr[data-migration]').length === 2`);
    const seen: string[] = [...(await shown())];
    expect(await page.locator('#newer').isDisabled()).toBe(true);
    for (const pageNo of [2, 3]) {
      await page.click('#older');
      await until(page, `document.getElementById('pageNo').textContent === 'page ${pageNo}'`);
      await until(
        page,
        `![...document.querySelectorAll('#migrations tr[data-migration]')].some((r) => ${JSON.stringify(seen)}.includes(r.dataset.migration))`,
      );
      seen.push(...(await shown()));
    }
    expect(await page.locator('#older').isDisabled()).toBe(true);
    expect([...seen].sort()).toEqual(['m-ops-0', 'm-ops-1', 'm-ops-2', 'm-ops-fail', 'm-ops-west']);
    await page.click('#newer');
    await until(page, `document.getElementById('pageNo').textContent === 'page 2'`);
    expect(violations).toEqual([]);
    expect(existsSync(join(outputDir, 'status-page-operator.png'))).toBe(true);
  } finally {
    await browser.close();
    await host.close();
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test('under App Service authentication: the page signs a browser in, refuses one without Ops.Read, and signs in again on a 401', async () => {
  const host = await startLocalHost({
    env: { PORT: '0', ROUTELOCK_AUTH: 'appservice' },
    store: new SqliteStore(':memory:'),
    log: () => undefined,
  });
  const browser = await launchBrowser();
  const signIn = '/.auth/login/aad?post_login_redirect_uri=%2Fapi%2Fstatus%3FsignedIn%3D1';
  // App Service's own sign-in, stood in for: the embedded host has no /.auth routes
  const stubSignIn = async (context: BrowserContext) =>
    context.route('**/.auth/login/aad*', (r) =>
      r.fulfill({ status: 200, contentType: 'text/html', body: '<p>sign in</p>' }),
    );
  try {
    // no identity: the page itself sends the browser to sign in, back to the page
    const anonymous = await browser.newContext();
    await stubSignIn(anonymous);
    const away = await anonymous.newPage();
    await away.goto(`${host.url}/api/status`);
    expect(away.url()).toBe(`${host.url}${signIn}`);

    // signed in without Ops.Read (App Service would forward the principal): 403
    const outsider = await browser.newContext({
      extraHTTPHeaders: asPrincipal({ oid: '00000000-0000-4000-8000-0000000000c1', roles: ['Routes.Read'] }),
    });
    const refused = await (await outsider.newPage()).goto(`${host.url}/api/status`);
    expect(refused!.status()).toBe(403);

    // with Ops.Read: the page and its reads; once a read answers 401 (the session ended), sign in again
    const reader = await browser.newContext({
      extraHTTPHeaders: asPrincipal({ oid: '00000000-0000-4000-8000-0000000000c2', roles: ['Ops.Read'] }),
    });
    await stubSignIn(reader);
    const page = await reader.newPage();
    const opened = await page.goto(`${host.url}/api/status`);
    expect(opened!.status()).toBe(200);
    await until(page, `document.getElementById('updated').textContent.startsWith('updated ')`);
    await page.route('**/api/ops/view/migrations*', (r) =>
      r.fulfill({ status: 401, contentType: 'application/problem+json', body: '{"code":"Unauthenticated"}' }),
    );
    await page.waitForURL(`${host.url}${signIn}`, { timeout: 10_000 });
  } finally {
    await browser.close();
    await host.close();
  }
}, 60_000);
