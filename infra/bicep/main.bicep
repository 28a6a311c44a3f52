// routelock on Azure: a Flex Consumption Function App behind Microsoft Entra authentication, its
// storage, the Cosmos DB routing store, the Key Vault that holds the fencing-token key set, and
// Application Insights, all reached with one user-assigned managed identity. No keys anywhere else.
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

@description('The second region (ROUTELOCK_SECONDARY_REGION); by default the Cosmos DB read region.')
param secondaryRegion string = cosmosLocations[1]

@minLength(1)
@description('Declared migration target regions (ROUTELOCK_REGIONS): a route may only be placed in or moved to one of these.')
param allowedRegions array = [location, secondaryRegion]

@minValue(300)
@description('Bounded staleness: replica lag in seconds (300 is the multi-region minimum). Feeds ROUTELOCK_REPLICATION_BOUND_SECONDS.')
param maxStalenessIntervalSeconds int = 300

@minValue(100000)
@description('Bounded staleness: replica lag in versions (100000 is the multi-region minimum).')
param maxStalenessPrefix int = 100000

@description('Most instances the Flex Consumption app may scale to.')
param maximumInstanceCount int = 100

@description('Object id of the deploying principal (azd sets AZURE_PRINCIPAL_ID). Used only with grantDeveloperDataAccess.')
param principalId string = ''

@description('Kind of the deploying principal (azd sets AZURE_PRINCIPAL_TYPE): a person, or the CI service principal.')
@allowed(['User', 'ServicePrincipal', 'Group'])
param principalType string = 'User'

@description('Give the deploying principal data-plane roles on the host storage, for debugging. Off in production.')
param grantDeveloperDataAccess bool = false

@description('Object ids of services that link @routelock/library and read the routing store directly: each gets only the Cosmos DB Built-in Data Reader role, on the locations container (docs/services.md).')
param routeReaderPrincipalIds array = []

// Who may call. The API's Entra app registration is created by infra/hooks/entra-app.sh (azd
// preprovision), which stores its application id as ENTRA_CLIENT_ID.
@minLength(36)
@maxLength(36)
@description('Application (client) id of the routelock API app registration (ENTRA_CLIENT_ID).')
param entraClientId string

@description('Directory (tenant) that issues the access tokens.')
param entraTenantId string = subscription().tenantId

@description('Accepted token audiences; the client id itself is always accepted too (v2 access tokens carry it as aud).')
param entraAudiences array = ['api://${entraClientId}']

@allowed(['appservice', 'entra'])
@description('ROUTELOCK_AUTH. appservice: App Service authentication validates the token and the app reads the principal it forwards; entra: the app validates the bearer token itself as well.')
param authMode string = 'appservice'

@secure()
@description('The fencing-token key set JSON, base64-encoded (ROUTELOCK_TOKEN_KEYS_B64, written by infra/hooks/token-keys.sh on the first provision). Empty: the Key Vault secret is left as it is.')
param tokenKeysBase64 string = ''

@allowed(['azureStorage', 'durableTaskScheduler'])
@description('The Durable Functions backend. azureStorage: the host storage account (the default, nothing more to deploy); durableTaskScheduler: a Durable Task Scheduler and task hub, for migration rates the storage backend cannot sustain (docs/operators.md, "Sizing the Durable backend").')
param durableBackend string = 'azureStorage'

@allowed(['Dedicated', 'Consumption'])
@description('Durable Task Scheduler SKU (durableBackend = durableTaskScheduler).')
param durableTaskSchedulerSku string = 'Dedicated'

@minValue(1)
@description('Durable Task Scheduler capacity units (Dedicated SKU).')
param durableTaskSchedulerCapacity int = 1

@description('Addresses allowed to reach the Durable Task Scheduler. Flex Consumption has no fixed outbound address, so all; every call still needs the app identity\'s Entra token and role.')
param durableTaskSchedulerIpAllowlist array = ['0.0.0.0/0']

@description('Email address the alerts go to; empty: the action group has no receiver yet.')
param alertEmail string = ''

@description('Where docs/operators.md is published: every alert\'s description links its Runbook section there.')
param runbookUrl string = 'docs/operators.md'

@minValue(1)
@description('Alert when the write-lock hold p99 over an hour exceeds this many seconds (the write lease is writeLeaseSeconds).')
param writeLockP99ThresholdSeconds int = 60

@minValue(0)
@description('Alert when more Cosmos DB requests than this are throttled (429 after the SDK\'s retries) in 15 minutes.')
param storeThrottledPerWindow int = 10

// ROUTELOCK_* settings, production defaults of docs/design.md §3. The convergence delay is the largest cache
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
@description('Milliseconds after a store read began that a concurrent resolve of the same route may still join it; at most a tenth of inFlightGraceSeconds.')
param coalesceJoinMs int = 50
@description('ROUTELOCK_ANNOUNCED_LOCKS: take announced locks (design §3.7). Turn on only once every library that changes routes understands schema version 2.')
param announcedLocks bool = false
param retryAttempts int = 5
@description('Attempts of a migration, each with a fresh lock, before it ends Failed (1-10).')
param migrationAttempts int = 3
@description('Seconds before a failed migration attempt is tried again (x 2^(n-1)).')
param migrationRetryDelaySeconds int = 300
@description('Seconds between a campaign\'s ticks (its starts, refreshes and pause/cancel handling).')
param campaignTickSeconds int = 5
param retryIntervalSeconds int = 5
@description('Migration participants, JSON: [{"name":"messages","url":"https://…/migrate"}].')
param participants string = '[]'
param probeSchedule string = '0 */5 * * * *'
param sweepSchedule string = '0 */15 * * * *'
@description('NCRONTAB of the telemetry reconciliation (documents changed against what the change feed handler saw).')
param reconcileSchedule string = '0 */15 * * * *'
@description('ROUTELOCK_RECONCILE_WINDOW_SECONDS: how far back a reconciliation run looks. At least the schedule\'s period + the grace, or the app refuses to start (it names the variable): raise it with a slower schedule.')
param reconcileWindowSeconds int = 3600
@description('ROUTELOCK_RECONCILE_GRACE_SECONDS: changes younger than this are left to the next run. At least the change-feed trigger\'s retry horizon (1515 s), or the app refuses to start.')
param reconcileGraceSeconds int = 1800
@description('Region of the probe resource (probe-{region}); empty: the host region.')
param probeRegion string = ''
@description('Cosmos region treated as "nearest" by the router; empty: the host region (REGION_NAME).')
param preferredRegion string = ''

var abbrs = loadJsonContent('abbreviations.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var functionAppName = '${abbrs.webSitesFunctions}routelock-${resourceToken}'
// Names known before deployment: role-assignment names and scopes derive from these rather than from module
// outputs, so What-If can predict them (linter rule what-if-short-circuiting).
var identityName = '${abbrs.managedIdentityUserAssignedIdentities}routelock-${resourceToken}'
var storageAccountName = '${abbrs.storageStorageAccounts}${resourceToken}'
var applicationInsightsName = '${abbrs.insightsComponents}${resourceToken}'
var deploymentContainerName = 'app-package-${take(resourceToken, 12)}'
var keyVaultName = '${abbrs.keyVaultVaults}${resourceToken}'
var tokenKeysSecretName = 'routelock-token-keys'
// The app setting is a reference; the platform resolves it with the app's identity.
var tokenKeysReference = '@Microsoft.KeyVault(VaultName=${keyVaultName};SecretName=${tokenKeysSecretName})'
var audiences = union(entraAudiences, [entraClientId])
// host.json names the task hub through ROUTELOCK_TASK_HUB; the scheduler's task hub has the same name.
var taskHubName = 'routelock'
var useDurableTaskScheduler = durableBackend == 'durableTaskScheduler'
// The Azure Storage provider's queues, as app settings so that host.json names no provider (the
// scheduler replaces it): a host that dies or is stopped (every deploy stops it forced) leaves the
// messages it had dequeued invisible this long, and a migration inside its write lock stands still
// meanwhile. 5 min by default, past the 300 s production write lease: the attempt would overrun. 1 min
// is the least the extension takes for the control queues; a running episode or activity keeps its
// messages hidden by renewing them every 30 s (docs/design.md §6.7).
var azureStorageDurableSettings = {
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout: '00:01:00'
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout: '00:01:00'
}

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module identity 'modules/identity.bicep' = {
  name: 'identity'
  scope: rg
  params: {
    name: identityName
    location: location
    tags: tags
  }
}

module storage 'modules/storage.bicep' = {
  name: 'storage'
  scope: rg
  params: {
    name: storageAccountName
    location: location
    tags: tags
    deploymentContainerName: deploymentContainerName
    logAnalyticsWorkspaceId: monitoring.outputs.workspaceId
  }
}

// Known before deployment: the readers' role assignments (cosmosReaders) name the account by it too.
var cosmosAccountName = '${abbrs.documentDBDatabaseAccounts}${resourceToken}'

module cosmos 'modules/cosmos.bicep' = {
  name: 'cosmos'
  scope: rg
  params: {
    name: cosmosAccountName
    tags: tags
    locations: cosmosLocations
    maxStalenessIntervalSeconds: maxStalenessIntervalSeconds
    maxStalenessPrefix: maxStalenessPrefix
    principalId: identity.outputs.principalId
    principalKey: identityName
    logAnalyticsWorkspaceId: monitoring.outputs.workspaceId
  }
}

// Services resolving from Cosmos DB directly (@routelock/library): read-only on the locations container.
module cosmosReaders 'modules/cosmosReaders.bicep' = {
  name: 'cosmosReaders'
  scope: rg
  params: {
    accountName: cosmosAccountName
    databaseName: cosmos.outputs.databaseName
    principalIds: routeReaderPrincipalIds
  }
}

module monitoring 'modules/monitoring.bicep' = {
  name: 'monitoring'
  scope: rg
  params: {
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    applicationInsightsName: applicationInsightsName
    alertNamePrefix: '${abbrs.insightsScheduledQueryRules}routelock-'
    actionGroupName: '${abbrs.insightsActionGroups}routelock-${resourceToken}'
    alertEmail: alertEmail
    runbookUrl: runbookUrl
    writeLockP99ThresholdSeconds: writeLockP99ThresholdSeconds
    storeThrottledPerWindow: storeThrottledPerWindow
    prelockLeaseSeconds: prelockLeaseSeconds
    hardDeleteLeaseSeconds: hardDeleteLeaseSeconds
    writeLeaseSeconds: writeLeaseSeconds
    writeBudgetSeconds: writeBudgetSeconds
    telemetryDelaySeconds: reconcileGraceSeconds
    location: location
    tags: tags
  }
}

// The operations workbook, drawing the app's own write lease and budget (the settings ROUTELOCK_* gets).
// It names Application Insights by its known name (what-if-short-circuiting), so the order is stated.
module workbook 'modules/workbook.bicep' = {
  name: 'workbook'
  scope: rg
  dependsOn: [monitoring]
  params: {
    applicationInsightsName: applicationInsightsName
    location: location
    tags: tags
    writeLeaseSeconds: writeLeaseSeconds
    writeBudgetSeconds: writeBudgetSeconds
    writeLockP99ThresholdSeconds: writeLockP99ThresholdSeconds
  }
}

module keyvault 'modules/keyvault.bicep' = {
  name: 'keyvault'
  scope: rg
  params: {
    name: keyVaultName
    location: location
    tags: tags
    appPrincipalId: identity.outputs.principalId
    appPrincipalKey: identityName
    logAnalyticsWorkspaceId: monitoring.outputs.workspaceId
    tokenKeysSecretName: tokenKeysSecretName
    tokenKeysBase64: tokenKeysBase64
  }
}

module durableTaskScheduler 'modules/durableTaskScheduler.bicep' = if (useDurableTaskScheduler) {
  name: 'durableTaskScheduler'
  scope: rg
  params: {
    name: '${abbrs.durableTaskSchedulers}${resourceToken}'
    location: location
    tags: tags
    taskHubName: taskHubName
    skuName: durableTaskSchedulerSku
    capacity: durableTaskSchedulerCapacity
    ipAllowlist: durableTaskSchedulerIpAllowlist
    principalId: identity.outputs.principalId
    principalKey: identityName
    identityClientId: identity.outputs.clientId
  }
}

module api 'modules/functionapp.bicep' = {
  name: 'api'
  scope: rg
  // The identity must hold Key Vault Secrets User (and the secret exist) before the app resolves
  // the ROUTELOCK_TOKEN_KEYS reference.
  dependsOn: [keyvault]
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
    logAnalyticsWorkspaceId: monitoring.outputs.workspaceId
    entraClientId: entraClientId
    entraTenantId: entraTenantId
    entraAudiences: audiences
    // Under entra the app validates bearer tokens only and no browser sign-in is served: the page keeps
    // App Service's 401 like the API. Under appservice it is excluded, to send a browser to sign in.
    browserPagePaths: authMode == 'appservice' ? ['/api/status'] : []
    appSettings: {
      ROUTELOCK_PROFILE: 'production'
      ROUTELOCK_STORE: 'cosmos'
      ROUTELOCK_TASK_HUB: taskHubName
      COSMOS_ENDPOINT: cosmos.outputs.endpoint
      COSMOS_DATABASE: cosmos.outputs.databaseName
      COSMOS_CONTAINER: 'locations'
      COSMOS_MIGRATIONS_CONTAINER: 'migrations'
      COSMOS_AUDIT_CONTAINER: 'audit'
      COSMOS_CAMPAIGNS_CONTAINER: 'campaigns'
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
      ROUTELOCK_COALESCE_JOIN_MS: string(coalesceJoinMs)
      ROUTELOCK_ANNOUNCED_LOCKS: string(announcedLocks)
      ROUTELOCK_RETRY_ATTEMPTS: string(retryAttempts)
      ROUTELOCK_RETRY_INTERVAL_SECONDS: string(retryIntervalSeconds)
      ROUTELOCK_MIGRATION_ATTEMPTS: string(migrationAttempts)
      ROUTELOCK_MIGRATION_RETRY_DELAY_SECONDS: string(migrationRetryDelaySeconds)
      ROUTELOCK_CAMPAIGN_TICK_SECONDS: string(campaignTickSeconds)
      ROUTELOCK_PARTICIPANTS: participants
      ROUTELOCK_PROBE_REGION: probeRegion
      ROUTELOCK_PROBE_SCHEDULE: probeSchedule
      ROUTELOCK_SWEEP_SCHEDULE: sweepSchedule
      ROUTELOCK_RECONCILE_SCHEDULE: reconcileSchedule
      ROUTELOCK_RECONCILE_WINDOW_SECONDS: string(reconcileWindowSeconds)
      ROUTELOCK_RECONCILE_GRACE_SECONDS: string(reconcileGraceSeconds)
      // Who may call: App Service authentication (authsettingsV2 in the app module) and the roles in
      // the token. The tenant and audiences are set in both modes.
      ROUTELOCK_AUTH: authMode
      ROUTELOCK_ENTRA_TENANT_ID: entraTenantId
      ROUTELOCK_ENTRA_AUDIENCES: join(audiences, ',')
      ROUTELOCK_REGIONS: join(allowedRegions, ',')
      // The fencing-token key set, from Key Vault (never in the app settings themselves).
      ROUTELOCK_TOKEN_KEYS: tokenKeysReference
    }
    // Azure Storage: host.json's default provider on AzureWebJobsStorage, its queues' visibility cut
    // (azureStorageDurableSettings). The scheduler: its storage-provider overrides and connection, once
    // the identity holds its role there.
    durableSettings: useDurableTaskScheduler ? durableTaskScheduler!.outputs.appSettings : azureStorageDurableSettings
  }
}

module rbac 'modules/rbac.bicep' = {
  name: 'rbac'
  scope: rg
  // It names the storage account and Application Insights by their known names (see above), so the
  // order is stated: the grants need those resources to exist.
  dependsOn: [storage, monitoring]
  params: {
    storageAccountName: storageAccountName
    applicationInsightsName: applicationInsightsName
    principalId: identity.outputs.principalId
    principalKey: identityName
    userPrincipalId: principalId
    userPrincipalType: principalType
    grantDeveloperDataAccess: grantDeveloperDataAccess
  }
}

output AZURE_LOCATION string = location
output AZURE_TENANT_ID string = tenant().tenantId
output AZURE_RESOURCE_GROUP string = rg.name
output SERVICE_API_NAME string = api.outputs.name
output SERVICE_API_URI string = api.outputs.uri
output COSMOS_ENDPOINT string = cosmos.outputs.endpoint
output AZURE_KEY_VAULT_NAME string = keyvault.outputs.name
output ROUTELOCK_TOKEN_KEYS_SECRET string = keyvault.outputs.tokenKeysSecretName
output ENTRA_TENANT_ID string = entraTenantId
// The postdeploy hook checks the status page by it: a 302 to sign in under appservice, a 401 under entra.
output ROUTELOCK_AUTH string = authMode
