// Log Analytics and Application Insights with local auth off (Entra only), the alerts operators act on
// (docs/operators.md "Runbook": the write-lock hold p99, a convergence shortfall, the probe failing, a migration
// stalled, orphaned locks, store throttling) and the action group every alert notifies. Each rule's query
// is in infra/monitoring/alerts/ (loaded here, so test/monitoring checks the text deployed); `{Name}` in
// one is replaced with the setting of that name below.
param logAnalyticsName string
param applicationInsightsName string
param alertNamePrefix string
param actionGroupName string
param location string
param tags object
@description('Who the alerts email; empty: the action group exists with no receiver (add one later, or wire a pager).')
param alertEmail string = ''
@description('Where docs/operators.md is published (its Runbook section is linked from every alert), e.g. https://github.com/<org>/routelock/blob/main/docs/operators.md.')
param runbookUrl string
@description('Alert when the write-lock hold p99 over an hour exceeds this many seconds.')
param writeLockP99ThresholdSeconds int
@description('Alert when more Cosmos DB requests than this are throttled (429 after the SDK retries) in 15 minutes.')
param storeThrottledPerWindow int
// The phase leases (ROUTELOCK_*_LEASE_SECONDS, ROUTELOCK_WRITE_BUDGET_SECONDS): a phase longer than its lease is a stall.
param prelockLeaseSeconds int
param hardDeleteLeaseSeconds int
param writeLeaseSeconds int
param writeBudgetSeconds int
@description('How late lock telemetry may be (the change-feed trigger\'s retries and ordinary lag: the reconciliation grace): the stalled-migration alert allows it past a lock\'s expiry.')
param telemetryDelaySeconds int

// Each alert's description ends with its runbook section (docs/operators.md headings; the test checks the anchors).
var runbook = '${runbookUrl}#'

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    retentionInDays: 30
    sku: { name: 'PerGB2018' }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: applicationInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

// Exists even without an email, so every alert rule is always attached to a group that can be given
// receivers without touching the rules.
resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = {
  name: actionGroupName
  location: 'Global'
  tags: tags
  properties: {
    groupShortName: 'routelock'
    enabled: true
    emailReceivers: empty(alertEmail)
      ? []
      : [
          {
            name: 'operators'
            emailAddress: alertEmail
            useCommonAlertSchema: true
          }
        ]
  }
}

resource writeLockHoldHigh 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}write-lock-hold-p99'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock write-lock hold p99 high'
    description: 'The p99 of the write-lock hold (writes refused with 423 for the whole hold) over the last hour is above ${writeLockP99ThresholdSeconds} s. Look at the workbook\'s write-lock hold chart and the slowest swaps\' participants; pause campaigns if it keeps rising. Runbook: ${runbook}write-lock-hold-p99-high'
    severity: 2
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT1H'
    criteria: {
      allOf: [
        {
          query: loadTextContent('../../monitoring/alerts/writeLockHoldP99.kql')
          timeAggregation: 'Maximum'
          metricMeasureColumn: 'p99HoldSeconds'
          operator: 'GreaterThan'
          threshold: writeLockP99ThresholdSeconds
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

resource convergenceShortfall 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}convergence-shortfall'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock convergence shortfall'
    description: 'A migration escalated after a wait shorter than the declared convergence delay (cache TTLs + replication bound): a cache may still serve the old location. Check the cache tiers every service runs against ROUTELOCK_CACHE_TIERS and the resource\'s data. Runbook: ${runbook}convergence-shortfall'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('../../monitoring/alerts/convergenceShortfall.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

resource probeFailing 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}probe-failing'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock synthetic probe failing'
    description: 'The lock cycle on probe-{region} failed: an enforcement regression, or the store is unhealthy. The failure names its phase and assertion; run POST /api/ops/probe to see it again. Runbook: ${runbook}synthetic-probe-failing'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('../../monitoring/alerts/probeFailing.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

resource migrationStalled 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}migration-stalled'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock migration stalled'
    description: 'A migration\'s lock is held past its latest known expiry (its last acquisition or renewal; without one, its phase\'s lease: prelock ${prelockLeaseSeconds} s, hard-delete ${hardDeleteLeaseSeconds} s, write ${writeLeaseSeconds} s renewed up to ${writeBudgetSeconds} s), by more than telemetry may be late (${telemetryDelaySeconds} s). Look at its status and timeline; cancel or retry it, or force-release its lock. Runbook: ${runbook}migration-stalled'
    severity: 2
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT15M'
    // The acquisitions of locks still held: as far back as a log alert reads (two days).
    overrideQueryTimeRange: 'P2D'
    criteria: {
      allOf: [
        {
          query: replace(
            replace(
              replace(
                replace(
                  replace(
                    loadTextContent('../../monitoring/alerts/migrationStalled.kql'),
                    '{PrelockLeaseSeconds}',
                    string(prelockLeaseSeconds)
                  ),
                  '{HardDeleteLeaseSeconds}',
                  string(hardDeleteLeaseSeconds)
                ),
                '{WriteLeaseSeconds}',
                string(writeLeaseSeconds)
              ),
              '{WriteBudgetSeconds}',
              string(writeBudgetSeconds)
            ),
            '{TelemetryDelaySeconds}',
            string(telemetryDelaySeconds)
          )
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

resource orphanedLocks 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}orphaned-locks'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock orphaned locks'
    description: 'The sweeper found (or reclaimed) a lock whose lease expired: the migration holding it stopped without releasing it. Find the migration and why it stopped; retry or cancel it. Runbook: ${runbook}orphaned-locks'
    severity: 3
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT30M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('../../monitoring/alerts/orphanedLocks.kql')
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

resource storeThrottling 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}store-throttling'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock store throttling'
    description: 'More than ${storeThrottledPerWindow} Cosmos DB requests were throttled (429 after the SDK\'s retries) in 15 minutes: callers saw 503 StoreUnavailable. Check the account\'s normalized RU consumption; pause campaigns, or raise the throughput. Runbook: ${runbook}store-throttling'
    severity: 2
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: loadTextContent('../../monitoring/alerts/storeThrottling.kql')
          timeAggregation: 'Total'
          metricMeasureColumn: 'throttled'
          operator: 'GreaterThan'
          threshold: storeThrottledPerWindow
          failingPeriods: { numberOfEvaluationPeriods: 1, minFailingPeriodsToAlert: 1 }
        }
      ]
    }
    actions: { actionGroups: [actionGroup.id] }
  }
}

output workspaceId string = workspace.id
output actionGroupId string = actionGroup.id
output applicationInsightsName string = appInsights.name
output applicationInsightsId string = appInsights.id
output connectionString string = appInsights.properties.ConnectionString
