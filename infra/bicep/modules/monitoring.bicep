// Log Analytics and Application Insights with local auth off (Entra only), and the two alerts that
// matter: the synthetic probe failing, and a convergence wait shorter than declared.
param logAnalyticsName string
param applicationInsightsName string
param alertNamePrefix string
param location string
param tags object

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
  }
}

output applicationInsightsName string = appInsights.name
output applicationInsightsId string = appInsights.id
output connectionString string = appInsights.properties.ConnectionString
