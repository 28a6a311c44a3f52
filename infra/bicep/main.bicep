// routelock on Azure: a Flex Consumption Function App, its storage, the Cosmos DB routing store and
// Application Insights, all reached with one user-assigned managed identity. No keys anywhere.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('azd environment name; seeds the resource token.')
param environmentName string

@minLength(1)
@description('Region of the Function App, its storage and monitoring.')
@metadata({ azd: { type: 'location' } })
param location string

@minLength(2)
@description('Cosmos DB regions, at least two; the first is the single write region.')
param cosmosLocations array

@minValue(300)
@description('Bounded staleness: replica lag in seconds (300 is the multi-region minimum). Feeds ROUTELOCK_REPLICATION_BOUND_SECONDS.')
param maxStalenessIntervalSeconds int = 300

@minValue(100000)
@description('Bounded staleness: replica lag in versions (100000 is the multi-region minimum).')
param maxStalenessPrefix int = 100000

@description('Most instances the Flex Consumption app may scale to.')
param maximumInstanceCount int = 100

@description('Object id of the deploying user, for data-plane access while debugging. Leave empty in production.')
param principalId string = ''

// ROUTELOCK_* settings, production defaults of DESIGN §3. The convergence delay is the largest cache
// tier TTL plus the replication bound: declare every tier your services really run.
param cacheTiers string = 'edge=7200,regional=1800,local=60'
param safetyBufferSeconds int = 600
param clockSkewSeconds int = 5
param prelockLeaseSeconds int = 172800
param prelockMaxSeconds int = 259200
param hardDeleteLeaseSeconds int = 21600
param writeLeaseSeconds int = 300
param writeBudgetSeconds int = 900
param retryAfterMaxSeconds int = 5
param deltaAttempts int = 3
param deltaRetryDelaySeconds int = 60
@description('Longest a service request takes from resolving its route to landing its write; copies start this long after each lock.')
param inFlightGraceSeconds int = 5
param retryAttempts int = 5
param retryIntervalSeconds int = 5
@description('Migration participants, JSON: [{"name":"messages","url":"https://…/migrate"}].')
param participants string = '[]'
param probeSchedule string = '0 */5 * * * *'
param sweepSchedule string = '0 */15 * * * *'
@description('Region of the probe resource (probe-{region}); empty: the host region.')
param probeRegion string = ''
@description('Cosmos region treated as "nearest" by the router; empty: the host region (REGION_NAME).')
param preferredRegion string = ''

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}routelock-${resourceToken}'
var deploymentContainerName = 'app-package-${take(resourceToken, 12)}'

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: '${abbrs.managedIdentityUserAssignedIdentities}routelock-${resourceToken}'
    location: location
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: '${abbrs.storageStorageAccounts}${resourceToken}'
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
  }
}

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  scope: rg
  params: {
    name: '${abbrs.documentDBDatabaseAccounts}${resourceToken}'
    tags: tags
    locations: cosmosLocations
    maxStalenessIntervalSeconds: maxStalenessIntervalSeconds
    maxStalenessPrefix: maxStalenessPrefix
    principalId: identity.outputs.principalId
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: '${abbrs.insightsComponents}${resourceToken}'
    alertNamePrefix: '${abbrs.insightsScheduledQueryRules}routelock-'
    location: location
    tags: tags
  }
}

module api 'modules/functionapp.bicep' = {
  name: 'api'
  scope: rg
  params: {
    name: functionAppName
    planName: '${abbrs.webServerFarms}${resourceToken}'
    location: location
    tags: tags
    identityResourceId: identity.outputs.resourceId
    identityClientId: identity.outputs.clientId
    storageAccountName: storage.outputs.name
    storageBlobEndpoint: storage.outputs.blobEndpoint
    storageQueueEndpoint: storage.outputs.queueEndpoint
    storageTableEndpoint: storage.outputs.tableEndpoint
    deploymentContainerName: deploymentContainerName
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    maximumInstanceCount: maximumInstanceCount
    appSettings: {
      ROUTELOCK_PROFILE: 'production'
      ROUTELOCK_STORE: 'cosmos'
      ROUTELOCK_TASK_HUB: 'routelock'
      COSMOS_ENDPOINT: cosmos.outputs.endpoint
      COSMOS_DATABASE: cosmos.outputs.databaseName
      COSMOS_CONTAINER: 'locations'
      COSMOS_MIGRATIONS_CONTAINER: 'migrations'
      COSMOS_AUDIT_CONTAINER: 'audit'
      COSMOS_PREFERRED_REGION: preferredRegion
      // The change feed trigger's identity-based connection "COSMOS".
      COSMOS__accountEndpoint: cosmos.outputs.endpoint
      COSMOS__credential: 'managedidentity'
      COSMOS__clientId: identity.outputs.clientId
      ROUTELOCK_CACHE_TIERS: cacheTiers
      ROUTELOCK_REPLICATION_BOUND_SECONDS: string(maxStalenessIntervalSeconds)
      ROUTELOCK_SAFETY_BUFFER_SECONDS: string(safetyBufferSeconds)
      ROUTELOCK_CLOCK_SKEW_SECONDS: string(clockSkewSeconds)
      ROUTELOCK_PRELOCK_LEASE_SECONDS: string(prelockLeaseSeconds)
      ROUTELOCK_PRELOCK_MAX_SECONDS: string(prelockMaxSeconds)
      ROUTELOCK_HARD_DELETE_LEASE_SECONDS: string(hardDeleteLeaseSeconds)
      ROUTELOCK_WRITE_LEASE_SECONDS: string(writeLeaseSeconds)
      ROUTELOCK_WRITE_BUDGET_SECONDS: string(writeBudgetSeconds)
      ROUTELOCK_RETRY_AFTER_MAX_SECONDS: string(retryAfterMaxSeconds)
      ROUTELOCK_DELTA_ATTEMPTS: string(deltaAttempts)
      ROUTELOCK_DELTA_RETRY_DELAY_SECONDS: string(deltaRetryDelaySeconds)
      ROUTELOCK_INFLIGHT_GRACE_SECONDS: string(inFlightGraceSeconds)
      ROUTELOCK_RETRY_ATTEMPTS: string(retryAttempts)
      ROUTELOCK_RETRY_INTERVAL_SECONDS: string(retryIntervalSeconds)
      ROUTELOCK_PARTICIPANTS: participants
      ROUTELOCK_PROBE_REGION: probeRegion
      ROUTELOCK_PROBE_SCHEDULE: probeSchedule
      ROUTELOCK_SWEEP_SCHEDULE: sweepSchedule
    }
  }
}

module rbac 'modules/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  params: {
    storageAccountName: storage.outputs.name
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    principalId: identity.outputs.principalId
    userPrincipalId: principalId
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output SERVICE_API_NAME string = api.outputs.name
output SERVICE_API_URI string = api.outputs.uri
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
