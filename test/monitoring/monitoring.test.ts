import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { functionEndpoints } from '../../functions/endpoints';
import { profiles } from '../../shared/core/profiles';
import {
  type ArmModule,
  type ArmResource,
  type ArmTemplate,
  evaluate,
  loadArmTemplate,
  moduleNamed,
  resourceIn,
  resourcesOfType,
} from '../support/arm';
import { checkQuery, nameCatalogue, substituteParameters } from './kql';

/**
 * The workbook and the alerts as deployed: read from the compiled ARM template (infra/arm/main.json,
 * `npm run infra:build`), every query evaluated as ARM would (the .kql text the Bicep loads, its settings
 * put in) and checked by Kusto.Language against the Application Insights tables, with every event, metric
 * and availability name it compares against the one catalogue (shared/migration/telemetry/names.ts). Every alert
 * notifies the action group and links its runbook section in docs/operators.md; the workbook draws the configured lease
 * and budget. Negative controls plant the faults each check is for.
 */

const root = join(__dirname, '..', '..');
let compiled: ArmTemplate | undefined;
const arm = (): ArmTemplate => (compiled ??= loadArmTemplate(root));
const catalogue = nameCatalogue(functionEndpoints.map((e) => e.name));

/** main's parameters at their defaults (what `azd up` deploys unless told otherwise). */
function mainDefaults(template: ArmTemplate): Record<string, unknown> {
  return Object.fromEntries(Object.entries(template.parameters ?? {}).map(([k, p]) => [k, p.defaultValue]));
}

/** A module's parameters as main passes them, evaluated where constant (names built from uniqueString are not). */
function boundParameters(
  module: ArmModule,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  const scope = { template: module.parent, parameters: { ...mainDefaults(module.parent), ...overrides } };
  const bound: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(module.parameters)) {
    try {
      bound[name] = evaluate(value, scope);
    } catch {
      // not constant before deployment (a resource token, an output): no query or description uses it
    }
  }
  return bound;
}

interface Rule {
  name: string;
  query: string;
  description: string;
  actions: unknown;
}

/** The scheduled query rules, each query and description evaluated with main's defaults. */
function alertRules(template: ArmTemplate, overrides: Record<string, unknown> = {}): Rule[] {
  const monitoring = moduleNamed(template, 'monitoring');
  const scope = { template: monitoring.template, parameters: boundParameters(monitoring, overrides) };
  return resourcesOfType(template, 'Microsoft.Insights/scheduledQueryRules').map(({ resource }) => {
    const props = resource.properties as {
      description: string;
      criteria: { allOf: { query: string }[] };
      actions: unknown;
    };
    const [criterion, ...more] = props.criteria.allOf;
    if (!criterion || more.length > 0) throw new Error(`${resource.name}: one criterion expected`);
    return {
      name: resource.name,
      query: String(evaluate(criterion.query, scope)),
      description: String(evaluate(props.description, scope)),
      actions: props.actions,
    };
  });
}

interface WorkbookItem {
  type: number;
  name: string;
  content: {
    query?: string;
    parameters?: { name: string; type: number; value?: unknown }[];
  };
}

/** The workbook's items as deployed, and its parameters' values. */
function workbookOf(
  template: ArmTemplate,
  overrides: Record<string, unknown> = {},
): { resource: ArmResource; items: WorkbookItem[]; parameters: Record<string, string> } {
  const module = moduleNamed(template, 'workbook');
  const resource = resourceIn(module.template, 'Microsoft.Insights/workbooks');
  const scope = { template: module.template, parameters: boundParameters(module, overrides) };
  // serializedData is the whole object as JSON; its items are constant (its resource ids are not)
  expect((resource.properties as { serializedData: unknown }).serializedData).toBe(
    "[string(variables('workbook'))]",
  );
  const workbook = module.template.variables?.workbook as { items: unknown[] };
  const items = evaluate(workbook.items, scope) as WorkbookItem[];
  const parameters: Record<string, string> = {};
  for (const item of items.filter((i) => i.type === 9))
    for (const p of item.content.parameters ?? [])
      if (typeof p.value === 'string') parameters[p.name] = p.value;
  return { resource, items, parameters };
}

/** The workbook's queries, as the workbook runs them (its parameters substituted). */
function workbookQueries(template: ArmTemplate): { name: string; query: string }[] {
  const { items, parameters } = workbookOf(template);
  return items
    .filter((i) => i.type === 3)
    .map((i) => ({ name: i.name, query: substituteParameters(String(i.content.query), parameters) }));
}

/** Everything wrong with one query: diagnostics and names. */
function problems(query: string): string[] {
  const { diagnostics, names } = checkQuery(query, catalogue);
  return [...diagnostics, ...names];
}

// ---------------------------------------------------------------------------------------------------
// The checker itself: it must fail on what it is for.
// ---------------------------------------------------------------------------------------------------

// Kusto.Language builds its global symbols on first use (seconds on a busy machine): once, before the tests.
beforeAll(() => {
  checkQuery('customEvents | take 1', catalogue);
}, 120_000);

test('negative controls: a misspelt name, a syntax error, an unknown column, a name of the wrong kind', () => {
  const good = 'customEvents | where name == "MigrationSwapped" | summarize count() by bin(timestamp, 1h)';
  expect(problems(good)).toEqual([]);
  expect(problems(good.replace('MigrationSwapped', 'MigrationSwaped'))).toEqual([
    'customEvents: "MigrationSwaped" is not a name it has',
  ]);
  expect(problems(good.replace('| summarize', '| summarize ('))).not.toEqual([]);
  expect(problems(good.replace('bin(timestamp', 'bin(timestmp'))).toEqual([
    expect.stringContaining("The name 'timestmp' does not refer to any known column"),
  ]);
  // a metric's name on the events table, an event's on the metrics table
  expect(problems('customEvents | where name == "writeLockSeconds"')).toEqual([
    'customEvents: "writeLockSeconds" is not a name it has',
  ]);
  expect(problems('customMetrics | where name in ("storeThrottled", "LockAcquired")')).toEqual([
    'customMetrics: "LockAcquired" is not a name it has',
  ]);
  // an unknown table, a column of another table
  expect(problems('customEvnts | take 1')).not.toEqual([]);
  expect(problems('customEvents | project resultCode')).not.toEqual([]);
  // names it cannot check are refused, not passed: a name after a union, a computed name, `has`
  expect(problems('union customEvents, customMetrics | where name == "LockAcquired"').join('\n')).toContain(
    'left its table',
  );
  expect(problems('customEvents | where name == strcat("Lock", "Acquired")').join('\n')).toContain(
    'other than a string literal',
  );
  expect(problems('customEvents | where name has "Lock"').join('\n')).toContain('compared with has');
  // an undeclared workbook parameter stays in the text, and fails
  expect(problems(substituteParameters('customEvents | extend x = {NoSuchParameter}', {}))).not.toEqual([]);
});

// ---------------------------------------------------------------------------------------------------
// The queries as deployed.
// ---------------------------------------------------------------------------------------------------

test('every alert query parses and analyses clean, and reads only names the code emits', () => {
  const rules = alertRules(arm());
  expect(rules.length).toBe(6);
  for (const rule of rules)
    expect({ rule: rule.name, problems: problems(rule.query) }).toEqual({
      rule: rule.name,
      problems: [],
    });
  // the settings were put in: no placeholder is left in what is deployed
  for (const rule of rules)
    expect({ rule: rule.name, left: rule.query.match(/\{[A-Za-z]\w*\}/g) }).toEqual({
      rule: rule.name,
      left: null,
    });
});

test('every workbook query parses and analyses clean, and reads only names the code emits', () => {
  const queries = workbookQueries(arm());
  expect(queries.map((q) => q.name).sort()).toEqual(
    [
      'campaigns',
      'convergenceWait',
      'locksByPhase',
      'locksHeldNow',
      'migrationsByOutcome',
      'migrationsStopped',
      'probeFailures',
      'probes',
      'requestPath',
      'telemetryHealth',
      'writeLockHold',
    ].sort(),
  );
  for (const { name, query } of queries)
    expect({ panel: name, problems: problems(query) }).toEqual({ panel: name, problems: [] });
});

test('the panels and alerts read exactly these events, metrics and tables', () => {
  const used = (queries: string[]) => {
    const all: Record<string, Set<string>> = {};
    for (const q of queries)
      for (const [table, names] of Object.entries(checkQuery(q, catalogue).used))
        for (const n of names) (all[table] ??= new Set()).add(n);
    return Object.fromEntries(Object.entries(all).map(([t, s]) => [t, [...s].sort()]));
  };
  expect(used(workbookQueries(arm()).map((q) => q.query))).toEqual({
    availabilityResults: ['routelock-probe'],
    customEvents: [
      'AuditRecordDeferred',
      'CampaignEnded',
      'CampaignStarted',
      'ClockSkewHigh',
      'LockAcquired',
      'LockReleased',
      'MigrationEnded',
      'MigrationSwapped',
      'TelemetryGap',
    ],
    customMetrics: [
      'changeFeedLagSeconds',
      'deletesTombstoned',
      'requestsMisdirected',
      'routingUnavailable',
      'storeThrottled',
      'telemetryGaps',
      'writesRefused',
    ],
    requests: ['deleteRoute'],
  });
  expect(used(alertRules(arm()).map((r) => r.query))).toEqual({
    availabilityResults: ['routelock-probe'],
    customEvents: [
      'ConvergenceShortfall',
      'LockAcquired',
      'LockReleased',
      'LockRenewed',
      'MigrationEnded',
      'MigrationSwapped',
      'OrphanedLockFound',
      'OrphanedLockReclaimed',
    ],
    customMetrics: ['storeThrottled'],
  });
});

test('figures from custom events are deduplicated on eventKey', () => {
  // every query that reads customEvents groups by the event key (or, for campaigns, by the campaign)
  const queries = [
    ...workbookQueries(arm()).map((q) => ({ name: q.name, query: q.query })),
    ...alertRules(arm()).map((r) => ({ name: r.name, query: r.query })),
  ].filter((q) => q.query.includes('customEvents'));
  expect(queries.length).toBeGreaterThan(8);
  for (const { name, query } of queries) {
    const dedup =
      /tostring\(customDimensions\.eventKey\)/.test(query) &&
      /summarize arg_max\(timestamp, [^)]*\) by (eventKey|version)/.test(query);
    const perCampaign = /summarize arg_max\(timestamp, \*\) by campaignId/.test(query);
    expect({ name, deduplicated: dedup || perCampaign }).toEqual({ name, deduplicated: true });
  }
});

// ---------------------------------------------------------------------------------------------------
// The rules: an action group each, a runbook each.
// ---------------------------------------------------------------------------------------------------

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  for (const line of markdown.split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*$/.exec(line);
    if (!heading) continue;
    anchors.add(
      (heading[1] as string)
        .toLowerCase()
        .replace(/[^\p{L}\p{N}\s_-]/gu, '')
        .replace(/\s/g, '-'),
    );
  }
  return anchors;
}

/** Where each rule's description sends its reader: the anchors under the runbook URL. */
function runbookLinks(rules: Rule[], runbookUrl: string): Record<string, string | undefined> {
  return Object.fromEntries(
    rules.map((r) => [
      r.name,
      new RegExp(`Runbook: ${runbookUrl.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}#([\\w-]+)`).exec(
        r.description,
      )?.[1],
    ]),
  );
}

test("every alert says what to do and links its runbook section, which the operators' guide has", () => {
  const readme = readFileSync(join(root, 'docs/operators.md'), 'utf8');
  const anchors = headingAnchors(readme);
  expect(anchors.has('runbook')).toBe(true);
  const rules = alertRules(arm());
  const links = runbookLinks(rules, 'docs/operators.md');
  for (const rule of rules) {
    const anchor = links[rule.name];
    expect({ rule: rule.name, anchor, inReadme: anchor !== undefined && anchors.has(anchor) }).toEqual({
      rule: rule.name,
      anchor: expect.any(String),
      inReadme: true,
    });
  }
  // one section each
  expect(new Set(Object.values(links)).size).toBe(rules.length);
  // the runbook URL is a parameter an operator sets (where the guide is published)
  const elsewhere = runbookLinks(
    alertRules(arm(), { runbookUrl: 'https://example.test/docs/operators.md' }),
    'https://example.test/docs/operators.md',
  );
  expect(Object.values(elsewhere)).toEqual(Object.values(links));
  // negative control: an anchor the guide lacks is caught
  expect(headingAnchors('## Runbook\n### Store throttling\n').has('store-throttling')).toBe(true);
  expect(headingAnchors('## Runbook\n### Store throttled\n').has('store-throttling')).toBe(false);
});

test('every alert notifies the one action group', () => {
  const monitoring = moduleNamed(arm(), 'monitoring');
  const group = resourceIn(monitoring.template, 'Microsoft.Insights/actionGroups');
  expect(group).not.toHaveProperty('condition');
  for (const rule of alertRules(arm()))
    expect({ rule: rule.name, actions: rule.actions }).toEqual({
      rule: rule.name,
      actions: {
        actionGroups: ["[resourceId('Microsoft.Insights/actionGroups', parameters('actionGroupName'))]"],
      },
    });
});

test("the stall alert uses each phase's configured lease; the hold and throttling alerts their thresholds", () => {
  const production = profiles.production;
  const stalled = alertRules(arm()).find((r) => r.name.includes('migration-stalled'));
  expect(stalled?.query).toContain(`todouble(${production.ROUTELOCK_PRELOCK_LEASE_SECONDS})`);
  expect(stalled?.query).toContain(`todouble(${production.ROUTELOCK_HARD_DELETE_LEASE_SECONDS})`);
  expect(stalled?.query).toContain(
    `max_of(todouble(${production.ROUTELOCK_WRITE_LEASE_SECONDS}), todouble(${production.ROUTELOCK_WRITE_BUDGET_SECONDS}))`,
  );
  // a different lease deployed is the lease the alert uses
  const longer = alertRules(arm(), { hardDeleteLeaseSeconds: 43200 }).find((r) =>
    r.name.includes('migration-stalled'),
  );
  expect(longer?.query).toContain('todouble(43200)');

  const monitoring = moduleNamed(arm(), 'monitoring');
  const rule = (name: string) =>
    resourcesOfType(arm(), 'Microsoft.Insights/scheduledQueryRules').find((r) =>
      r.resource.name.includes(name),
    )?.resource.properties as { criteria: { allOf: Record<string, unknown>[] } } | undefined;
  expect(rule('write-lock-hold-p99')?.criteria.allOf[0]).toMatchObject({
    metricMeasureColumn: 'p99HoldSeconds',
    timeAggregation: 'Maximum',
    operator: 'GreaterThan',
    threshold: "[parameters('writeLockP99ThresholdSeconds')]",
  });
  expect(rule('store-throttling')?.criteria.allOf[0]).toMatchObject({
    metricMeasureColumn: 'throttled',
    threshold: "[parameters('storeThrottledPerWindow')]",
  });
  expect(boundParameters(monitoring)).toMatchObject({
    writeLockP99ThresholdSeconds: 60,
    storeThrottledPerWindow: 10,
  });
});

// ---------------------------------------------------------------------------------------------------
// The workbook: the configured lease and budget.
// ---------------------------------------------------------------------------------------------------

/** The lease and budget lines the hold chart draws, as deployed with `overrides` of main's parameters. */
function holdChartLines(
  template: ArmTemplate,
  overrides: Record<string, unknown> = {},
): Record<string, string> {
  const { items, parameters } = workbookOf(template, overrides);
  const hold = items.find((i) => i.name === 'writeLockHold');
  const query = substituteParameters(String(hold?.content.query), parameters);
  const lines: Record<string, string> = {};
  for (const m of query.matchAll(/(\w+Seconds) = todouble\((\d+)\)/g)) lines[m[1] as string] = m[2] as string;
  return lines;
}

test('the write-lock hold chart draws the configured write lease and budget (and the alert threshold)', () => {
  const production = profiles.production;
  expect(holdChartLines(arm())).toEqual({
    writeLeaseSeconds: production.ROUTELOCK_WRITE_LEASE_SECONDS,
    writeBudgetSeconds: production.ROUTELOCK_WRITE_BUDGET_SECONDS,
    p99AlertSeconds: '60',
  });
  // the same parameters of main feed the app's settings and the workbook
  const workbook = moduleNamed(arm(), 'workbook');
  expect(workbook.parameters).toMatchObject({
    writeLeaseSeconds: "[parameters('writeLeaseSeconds')]",
    writeBudgetSeconds: "[parameters('writeBudgetSeconds')]",
  });
  const api = moduleNamed(arm(), 'api').parameters.appSettings as Record<string, unknown>;
  expect(api.ROUTELOCK_WRITE_LEASE_SECONDS).toBe("[string(parameters('writeLeaseSeconds'))]");
  expect(api.ROUTELOCK_WRITE_BUDGET_SECONDS).toBe("[string(parameters('writeBudgetSeconds'))]");
  // negative control: a deployment with another budget draws that budget
  expect(holdChartLines(arm(), { writeBudgetSeconds: 600 }).writeBudgetSeconds).toBe('600');
  // the workbook is the component's, and its items are what Azure Monitor reads
  const { resource } = workbookOf(arm());
  expect(resource).toMatchObject({ kind: 'shared', type: 'Microsoft.Insights/workbooks' });
  expect((resource.properties as { sourceId: string }).sourceId).toBe(
    "[resourceId('Microsoft.Insights/components', parameters('applicationInsightsName'))]",
  );
});

test('the workbook: unique panels over its time range, every configured figure used by a panel', () => {
  const { items, parameters } = workbookOf(arm());
  const names = items.map((i) => i.name);
  expect(new Set(names).size).toBe(names.length);
  const panels = items.filter((i) => i.type === 3);
  for (const panel of panels)
    expect({ panel: panel.name, content: panel.content }).toMatchObject({
      panel: panel.name,
      content: {
        version: 'KqlItem/1.0',
        queryType: 0,
        resourceType: 'microsoft.insights/components',
        timeContextFromParameter: 'TimeRange',
      },
    });
  const declared = items.flatMap((i) =>
    i.type === 9 ? (i.content.parameters ?? []).map((p) => p.name) : [],
  );
  expect(declared).toContain('TimeRange');
  // every setting passed from Bicep is drawn somewhere, and every placeholder a panel uses is declared
  const placeholders = new Set(
    panels.flatMap((p) =>
      [...String(p.content.query).matchAll(/\{([A-Za-z]\w*)(?::grain)?\}/g)].map((m) => m[1]),
    ),
  );
  expect([...placeholders].sort()).toEqual(declared.slice().sort());
  expect(Object.keys(parameters).sort()).toEqual(
    ['WriteBudgetSeconds', 'WriteLeaseSeconds', 'WriteLockP99ThresholdSeconds'].sort(),
  );
});
