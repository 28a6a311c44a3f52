// The operations workbook on Application Insights: migrations by outcome and phase, the write-lock hold
// against the configured lease and budget, convergence waits against the declared delay, the request path
// (refusals, tombstones, throttling), the probe, campaigns, and whether the telemetry can be trusted. Queries live in infra/monitoring/workbook/
// (loaded here, so what test/monitoring checks is the text deployed); `{Name}` in them is a parameter of
// the workbook, set below from the app's own settings.
param applicationInsightsName string
param location string
param tags object
@description('ROUTELOCK_WRITE_LEASE_SECONDS, drawn on the write-lock hold chart.')
param writeLeaseSeconds int
@description('ROUTELOCK_WRITE_BUDGET_SECONDS, drawn on the write-lock hold chart.')
param writeBudgetSeconds int
@description('The write-lock hold p99 alert\'s threshold, drawn on the same chart.')
param writeLockP99ThresholdSeconds int

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var queries = {
  migrationsByOutcome: loadTextContent('../../monitoring/workbook/migrationsByOutcome.kql')
  migrationsStopped: loadTextContent('../../monitoring/workbook/migrationsStopped.kql')
  locksByPhase: loadTextContent('../../monitoring/workbook/locksByPhase.kql')
  locksHeldNow: loadTextContent('../../monitoring/workbook/locksHeldNow.kql')
  writeLockHold: loadTextContent('../../monitoring/workbook/writeLockHold.kql')
  convergenceWait: loadTextContent('../../monitoring/workbook/convergenceWait.kql')
  requestPath: loadTextContent('../../monitoring/workbook/requestPath.kql')
  probes: loadTextContent('../../monitoring/workbook/probes.kql')
  probeFailures: loadTextContent('../../monitoring/workbook/probeFailures.kql')
  campaigns: loadTextContent('../../monitoring/workbook/campaigns.kql')
  telemetryHealth: loadTextContent('../../monitoring/workbook/telemetryHealth.kql')
}

// What every query item shares: Application Insights logs, over the workbook's time range.
var query = {
  version: 'KqlItem/1.0'
  size: 0
  queryType: 0
  resourceType: 'microsoft.insights/components'
  timeContextFromParameter: 'TimeRange'
}
// A configured figure, passed to the queries and hidden from the parameter bar.
var setting = {
  version: 'KqlParameterItem/1.0'
  type: 1
  isHiddenWhenLocked: true
}

var workbook = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 9
      name: 'parameters'
      content: {
        version: 'KqlParameterItem/1.0'
        style: 'pills'
        queryType: 0
        resourceType: 'microsoft.insights/components'
        parameters: [
          {
            id: 'e3c1a8f0-5b1d-4d8e-9a61-2f4b7c0d9e11'
            version: 'KqlParameterItem/1.0'
            name: 'TimeRange'
            label: 'Time range'
            type: 4
            isRequired: true
            value: { durationMs: 86400000 }
            typeSettings: {
              allowCustom: true
              selectableValues: [
                { durationMs: 3600000 }
                { durationMs: 14400000 }
                { durationMs: 86400000 }
                { durationMs: 259200000 }
                { durationMs: 604800000 }
                { durationMs: 2592000000 }
              ]
            }
          }
          union(setting, {
            id: '4f2b9d3e-8c7a-4e15-b0d2-6a9e1c3f5b27'
            name: 'WriteLeaseSeconds'
            label: 'Write lease (s)'
            value: string(writeLeaseSeconds)
          })
          union(setting, {
            id: '9a7c5e1b-3d2f-4b86-a4c9-0e8d6f2b1a53'
            name: 'WriteBudgetSeconds'
            label: 'Write budget (s)'
            value: string(writeBudgetSeconds)
          })
          union(setting, {
            id: 'c6d4b2a9-1e0f-4735-8b6a-5d3c9e7f0a18'
            name: 'WriteLockP99ThresholdSeconds'
            label: 'Write-lock p99 alert (s)'
            value: string(writeLockP99ThresholdSeconds)
          })
        ]
      }
    }
    {
      type: 1
      name: 'about'
      content: {
        json: '## routelock operations\nEvery figure from custom events counts each event once (deduplicated on `eventKey`: the change feed may redeliver a batch). Alerts and what to do: the Runbook in docs/operators.md.'
      }
    }
    {
      type: 3
      name: 'migrationsByOutcome'
      content: union(query, {
        title: 'Migrations ended (each start or retry), by outcome'
        query: queries.migrationsByOutcome
        visualization: 'barchart'
      })
    }
    {
      type: 3
      name: 'locksByPhase'
      content: union(query, {
        title: 'Locks taken, by phase'
        query: queries.locksByPhase
        visualization: 'timechart'
      })
    }
    {
      type: 3
      name: 'migrationsStopped'
      content: union(query, {
        title: 'Where migrations stopped (failed, conflict, cancelled)'
        query: queries.migrationsStopped
        visualization: 'table'
      })
    }
    {
      type: 3
      name: 'locksHeldNow'
      content: union(query, {
        title: 'Locks held now, by the phase last entered'
        query: queries.locksHeldNow
        visualization: 'table'
      })
    }
    {
      type: 3
      name: 'writeLockHold'
      content: union(query, {
        title: 'Write-lock hold (s): p50, p75, p99, max against the write lease, budget and alert'
        query: queries.writeLockHold
        visualization: 'timechart'
      })
    }
    {
      type: 3
      name: 'convergenceWait'
      content: union(query, {
        title: 'Convergence wait (s) against the declared delay'
        query: queries.convergenceWait
        visualization: 'timechart'
      })
    }
    {
      type: 3
      name: 'requestPath'
      content: union(query, {
        title: '423 refusals, tombstoned deletes, misdirected requests and store throttling'
        query: queries.requestPath
        visualization: 'timechart'
      })
    }
    {
      type: 3
      name: 'probes'
      content: union(query, {
        title: 'Synthetic probe runs and failures, by region'
        query: queries.probes
        visualization: 'timechart'
      })
    }
    {
      type: 3
      name: 'probeFailures'
      content: union(query, {
        title: 'Latest probe failures'
        query: queries.probeFailures
        visualization: 'table'
      })
    }
    {
      type: 3
      name: 'campaigns'
      content: union(query, {
        title: 'Campaigns: progress by their migrations\' last attempts'
        query: queries.campaigns
        visualization: 'table'
      })
    }
    {
      type: 3
      name: 'telemetryHealth'
      content: union(query, {
        title: 'Telemetry health: gaps found by the reconciliation, change feed lag, clock skew, deferred audit'
        query: queries.telemetryHealth
        visualization: 'timechart'
      })
    }
  ]
  fallbackResourceIds: [appInsights.id]
}

resource operationsWorkbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name is a GUID; stable per Application Insights resource, so a redeploy updates it.
  name: guid(appInsights.id, 'routelock-operations-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'routelock operations'
    category: 'workbook'
    sourceId: appInsights.id
    serializedData: string(workbook)
  }
}

output workbookId string = operationsWorkbook.id
