// Log Analytics and Application Insights with local auth off (Entra only), the two alerts that
// matter (the synthetic probe failing, a convergence wait shorter than declared) and the action group
// every alert notifies.
param logAnalyticsName string
param applicationInsightsName string
param alertNamePrefix string
param actionGroupName string
param location string
param tags object
@description('Who the alerts email; empty: the action group exists with no receiver (add one later, or wire a pager).')
param alertEmail string = ''

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

resource probeFailing 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}probe-failing'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock synthetic probe failing'
    description: 'The lock cycle on probe-{region} failed: an enforcement regression, or the store is unhealthy.'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'availabilityResults | where name == "routelock-probe" and success == false'
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

resource convergenceShortfall 'Microsoft.Insights/scheduledQueryRules@2023-03-15-preview' = {
  name: '${alertNamePrefix}convergence-shortfall'
  location: location
  tags: tags
  properties: {
    displayName: 'routelock convergence shortfall'
    description: 'A migration escalated after a wait shorter than the declared convergence delay (cache TTLs + replication bound).'
    severity: 1
    enabled: true
    scopes: [appInsights.id]
    evaluationFrequency: 'PT15M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: 'customEvents | where name == "ConvergenceShortfall"'
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

output workspaceId string = workspace.id
output actionGroupId string = actionGroup.id
output applicationInsightsName string = appInsights.name
output applicationInsightsId string = appInsights.id
output connectionString string = appInsights.properties.ConnectionString
