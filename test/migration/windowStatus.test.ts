import { migrationDetails } from '../../cli/format';
import type { MigrationStatus } from '../../shared/migration/types';
import { runStatusPageScript } from '../support/statusPageScript';

/**
 * `waitingForWindow` where operators look (docs/design.md §6.10): the status page's migrations table (its own
 * script run against stubbed reads, test/support/statusPageScript.ts; the browser test is
 * test/statusPage.test.ts) and the command line's `migration show`.
 */

const waitingStatus: MigrationStatus = {
  migrationId: 'm-w',
  resourceId: 'r-1',
  target: { region: 'eastus' },
  status: 'Running',
  phase: 'hardDelete',
  timeline: { prelockAt: '2026-01-01T00:00:00.000Z', hardDeleteAt: '2026-01-01T02:15:00.000Z' },
  waitingForWindow: { nextOpening: '2026-01-01T12:00:00.000Z' },
} as MigrationStatus;
const { waitingForWindow: _w, ...openStatus } = waitingStatus;

/** Run the page's script once against reads answering `migrations`; the migrations table's HTML. */
async function migrationsTable(migrations: MigrationStatus[]): Promise<string> {
  const element = await runStatusPageScript({
    '/api/ops/view/routes': { items: [] },
    '/api/ops/view/migrations': { items: migrations },
    '/api/ops/view/campaigns': { items: [] },
  });
  return element('migrations').innerHTML;
}

test('the status page shows a waiting migration with its next opening, and nothing once open', async () => {
  const waiting = await migrationsTable([waitingStatus]);
  expect(waiting).toContain('<span class="badge waiting"');
  expect(waiting).toContain('waiting for window · opens 2026-01-01T12:00:00.000Z');
  const open = await migrationsTable([openStatus as MigrationStatus]);
  expect(open).toContain('data-migration="m-w"');
  expect(open).not.toContain('waiting for window');
});

test('migration show: a "window" line while it waits', () => {
  expect(migrationDetails(waitingStatus)).toMatch(/window:\s+waiting; opens 2026-01-01T12:00:00.000Z/);
  expect(migrationDetails(openStatus as MigrationStatus)).not.toMatch(/waiting; opens/);
});
