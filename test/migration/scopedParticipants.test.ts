import type { DurableClient } from 'durable-functions';
import { DurableMigrationService } from '../../functions/durable/service';
import {
  ConfigError,
  type Participant,
  matchesResourcePattern,
  parseConfig,
  participantsFor,
} from '../../shared/config';
import type { HttpCall, MigrationInput } from '../../shared/migration/types';
import { migrationSettings } from '../../shared/migration/workflow';
import { Router } from '../../shared/core/router';
import { TokenKeyring } from '../../shared/core/security/tokenKeys';
import { SqliteMigrationState } from '../../shared/migration/store/sqlite/migrations';
import { SqliteStore } from '../../shared/core/store/sqlite/locations';
import { ManualClock } from '../../testkit/clock';
import { virtualRunner } from '../support/migrationHarness';

/**
 * Scoped participants (docs/design.md §6.5): an entry of ROUTELOCK_PARTICIPANTS may name the resource-id
 * patterns it owns (`*` = any run of characters, nothing else special), and a migration calls only the
 * participants whose patterns match its resource, chosen once at start and captured in the input.
 */

const SOURCE = { region: 'westeurope' };
const TARGET = { region: 'eastus' };

describe('matchesResourcePattern', () => {
  test.each([
    // [pattern, resourceId, matches]
    ['conv-7', 'conv-7', true], // exact
    ['conv-7', 'conv-77', false],
    ['conv-7', 'xconv-7', false],
    ['tenant-*', 'tenant-a', true], // prefix*
    ['tenant-*', 'tenant-', true], // `*` may match nothing
    ['tenant-*', 'tenant', false],
    ['tenant-*', 'other-tenant-a', false],
    ['*-eu', 'conv-eu', true], // *suffix
    ['*-eu', 'conv-eu-2', false],
    ['a*b', 'ab', true], // a*b
    ['a*b', 'axxb', true],
    ['a*b', 'axxbc', false],
    ['a*b', 'b', false],
    ['a*a', 'a', false], // prefix and suffix may not share a character
    ['a*b*c', 'a-b-c', true],
    ['a*b*c', 'a-c-b', false],
    ['a*b*c', 'abc', true],
    ['a*bb*b', 'abbb', true],
    ['a*bb*b', 'abb', false],
    ['*', 'anything', true],
    ['*', '', true],
    ['**', 'x', true],
    // regex metacharacters are literal
    ['conv.7', 'conv.7', true],
    ['conv.7', 'convx7', false],
    ['t+', 'tt', false],
    ['t+', 't+', true],
    ['[ab]', 'a', false],
    ['[ab]', '[ab]', true],
    ['^x$', 'x', false],
    ['(a|b)*', 'a', false],
    ['(a|b)*', '(a|b)-1', true],
    ['a?', 'a', false],
    ['a\\d', 'a1', false],
    ['a\\d', 'a\\d', true],
  ])('%j against %j → %s', (pattern, resourceId, matches) => {
    expect(matchesResourcePattern(resourceId, pattern)).toBe(matches);
  });
});

describe('participantsFor', () => {
  const all: Participant = { name: 'all', url: 'https://all.test/migrate' };
  const tenants: Participant = {
    name: 'tenants',
    url: 'https://tenants.test/migrate',
    resources: ['tenant-*', 'conv-7'],
  };
  const media: Participant = { name: 'media', url: 'https://media.test/migrate', resources: ['*-media'] };

  test.each([
    ['tenant-a', ['all', 'tenants']],
    ['conv-7', ['all', 'tenants']],
    ['conv-8', ['all']],
    ['x-media', ['all', 'media']],
    ['tenant-media', ['all', 'tenants', 'media']],
  ])('%s → %j (no `resources` = every resource; order kept)', (resourceId, names) => {
    expect(participantsFor(resourceId, [all, tenants, media]).map((p) => p.name)).toEqual(names);
  });

  test('an empty participant list picks none (a lock-only migration)', () => {
    expect(participantsFor('conv-1', [])).toEqual([]);
  });
});

describe('ROUTELOCK_PARTICIPANTS `resources`', () => {
  function problemsOf(participants: unknown): string[] {
    try {
      parseConfig({ ROUTELOCK_PARTICIPANTS: JSON.stringify(participants) });
    } catch (error) {
      if (error instanceof ConfigError) return error.problems;
      throw error;
    }
    return [];
  }

  test('parsed into the participant', () => {
    const config = parseConfig({
      ROUTELOCK_PARTICIPANTS: JSON.stringify([
        { name: 'messages', url: 'https://m.test/migrate', resources: ['tenant-*'] },
        { name: 'media', url: 'https://media.test/migrate' },
      ]),
    });
    expect(config.migration.participants).toEqual([
      { name: 'messages', url: 'https://m.test/migrate', resources: ['tenant-*'] },
      { name: 'media', url: 'https://media.test/migrate' },
    ]);
  });

  test.each([
    ['an empty list', [], /entry "media": 1\.resources: must list at least one pattern/],
    ['an empty pattern', [''], /entry "media": 1\.resources\.0: a pattern must not be empty/],
    ['a string instead of a list', 'tenant-*', /entry "media": 1\.resources: /],
    ['a number in the list', ['a', 7], /entry "media": 1\.resources\.1: /],
  ])('%s is refused with a message naming the variable and the entry', (_, resources, message) => {
    const problems = problemsOf([
      { name: 'messages', url: 'https://m.test/migrate' },
      { name: 'media', url: 'https://media.test/migrate', resources },
    ]);
    expect(problems).toEqual([expect.stringMatching(/^ROUTELOCK_PARTICIPANTS: /)]);
    expect(problems[0]).toMatch(message);
  });
});

describe('a migration calls only the participants scoped to its resource', () => {
  const PARTICIPANTS = JSON.stringify([
    { name: 'messages', url: 'https://messages.test/migrate' },
    { name: 'tenants', url: 'https://tenants.test/migrate', resources: ['tenant-*'] },
  ]);

  test.each([
    ['tenant-a', ['https://messages.test/migrate', 'https://tenants.test/migrate']],
    ['conv-1', ['https://messages.test/migrate']],
  ])('in-process: %s calls %j', async (resourceId, urls) => {
    const calls: HttpCall[] = [];
    const h = virtualRunner({
      env: { ROUTELOCK_PROFILE: 'dev', ROUTELOCK_PARTICIPANTS: PARTICIPANTS },
      http: async (call) => {
        calls.push(call);
        // version 4 asks verify too: these participants do not implement it (404)
        return call.body.step === 'verify'
          ? { status: 404, body: null }
          : { status: 200, body: { done: true } };
      },
    });
    await h.router.createRoute(resourceId, SOURCE);
    const { record } = h.runner.start({ resourceId, target: TARGET });
    await h.settle();
    expect(await h.runner.status(record.migrationId)).toMatchObject({ status: 'Completed' });
    // the choice is captured in the input, so a redeploy with other scopes cannot change the replay
    expect(record.input.settings.participants.map((p) => p.url)).toEqual(urls);
    const called = [...new Set(calls.map((c) => c.url))].sort();
    expect(called).toEqual(urls);
    for (const url of urls)
      expect(calls.filter((c) => c.url === url).map((c) => c.body.step)).toEqual([
        'bulkCopy',
        'deltaCopy',
        'verify',
        // version 4: and the end notice
        'completed',
      ]);
  });

  test('Durable: the started instance input holds only the matching participants', async () => {
    const config = parseConfig({ ROUTELOCK_PARTICIPANTS: PARTICIPANTS });
    const clock = new ManualClock();
    const router = new Router({
      store: new SqliteStore(':memory:'),
      timing: config.timing,
      clock: clock.now,
    });
    await router.createRoute('conv-1', SOURCE);
    const started: MigrationInput[] = [];
    const client = {
      getStatus: async (instanceId: string) => {
        const input = started.find((i) => i.instanceId === instanceId);
        if (!input)
          throw new Error(`Durable Functions extension replied with HTTP 404 response. ${instanceId}`);
        return { instanceId, runtimeStatus: 'Running', input };
      },
      startNew: async (_: string, options: { instanceId: string; input: MigrationInput }) => {
        started.push(options.input);
        return options.instanceId;
      },
    };
    const service = new DurableMigrationService(
      client as unknown as DurableClient,
      new SqliteMigrationState(':memory:'),
      router,
      migrationSettings(config),
      clock.now,
      TokenKeyring.ephemeral(),
    );
    await service.start({ resourceId: 'conv-1', target: TARGET });
    expect(started.map((i) => i.settings.participants.map((p) => p.name))).toEqual([['messages']]);
  });
});
