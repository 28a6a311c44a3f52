import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/** `npm test`'s set-up step: uses the browser it is pointed at, and refuses loudly rather than skipping. */

const script = join(__dirname, '..', 'scripts', 'ensure-browser.sh');
const run = (env: Record<string, string>) =>
  spawnSync('bash', [script], { env: { ...process.env, ...env }, encoding: 'utf8' });

test('a browser named by ROUTELOCK_CHROMIUM is used as it is', () => {
  const result = run({ ROUTELOCK_CHROMIUM: process.execPath });
  expect(result.status).toBe(0);
  expect(result.stdout).not.toMatch(/installing/);
});

test('a ROUTELOCK_CHROMIUM that is not an executable stops the tests with a message', () => {
  const result = run({ ROUTELOCK_CHROMIUM: join(__dirname, 'no-such-browser') });
  expect(result.status).toBe(1);
  expect(result.stderr).toMatch(/ROUTELOCK_CHROMIUM=.*no-such-browser is not an executable file/);
});
