// The routing store. One write region (compare-and-swap on ETags is only linearizable there), read
// replicas elsewhere, bounded staleness so a replica's lag has a bound the convergence delay covers.
// Local (key) auth is disabled: the app's identity gets the built-in Data Contributor role.
param name string
param tags object
@minLength(2)
@description('Regions of the account; the first is the single write region.')
param locations array
@minValue(300)
param maxStalenessIntervalSeconds int = 300
@minValue(100000)
param maxStalenessPrefix int = 100000
param databaseName string = 'routelock'
param principalId string
@description('A stable name for that principal, known before deployment (the identity\'s name): role-assignment names derive from it.')
param principalKey string
param logAnalyticsWorkspaceId string

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-10-15' = {
  name: name
  location: locations[0]
  tags: tags
  kind: 'GlobalDocumentDB'
  properties: {
    databaseAccountOfferType: 'Standard'
    disableLocalAuth: true
    // Databases and containers change through ARM (this template) only, never through the data plane.
    disableKeyBasedMetadataWriteAccess: true
    enableMultipleWriteLocations: false
    enableAutomaticFailover: true
    // Priority-based execution: when the container is busy, Low requests are throttled first. The router
    // sends route resolution High and migration traffic (orchestrator, sweeper, probe, listing) Low
    // (docs/design.md §5.7); a request that names none is High. These two properties first appear in a
    // GA API version at 2025-10-15, hence that version for the account and its children.
    enablePriorityBasedExecution: true
    defaultPriorityLevel: 'High'
    consistencyPolicy: {
      defaultConsistencyLevel: 'BoundedStaleness'
      maxIntervalInSeconds: maxStalenessIntervalSeconds
      maxStalenessPrefix: maxStalenessPrefix
    }
    locations: [
      for (region, i) in locations: {
        locationName: region
        failoverPriority: i
        isZoneRedundant: false
      }
    ]
  }
}

resource database 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases@2025-10-15' = {
  parent: account
  name: databaseName
  properties: { resource: { id: databaseName } }
}

// locations: the routing documents; leases: the change feed trigger's checkpoints (created here, since
// the identity cannot create containers); audit: the ledger; migrations: migration id → instance;
// campaigns: a campaign and its members, one logical partition per campaign (partition key /campaignId).
var containerNames = ['locations', 'leases', 'audit', 'migrations', 'campaigns']

// GET /migrations pages newest first (ORDER BY c.createdAt DESC, c.migrationId DESC), which Cosmos DB
// serves only from a composite index on both; the rest is the default policy. The same policy is
// migrationsIndexingPolicy in shared/migration/store/cosmos/migrations.ts (a test compares them).
var migrationsIndexingPolicy = {
  indexingMode: 'consistent'
  automatic: true
  includedPaths: [{ path: '/*' }]
  excludedPaths: [{ path: '/"_etag"/?' }]
  compositeIndexes: [
    [
      { path: '/createdAt', order: 'descending' }
      { path: '/migrationId', order: 'descending' }
    ]
  ]
}

// GET /campaigns pages newest first (ORDER BY c.createdAt DESC, c.campaignId DESC): its composite index;
// a campaign's members by state in seq order (WHERE campaignId, kind, state = ..., seq > ... ORDER BY
// c.campaignId, c.kind, c.state, c.seq): theirs. The same policy is campaignsIndexingPolicy in
// shared/campaign/store/cosmos/campaigns.ts (a test compares them).
var campaignsIndexingPolicy = {
  indexingMode: 'consistent'
  automatic: true
  includedPaths: [{ path: '/*' }]
  excludedPaths: [{ path: '/"_etag"/?' }]
  compositeIndexes: [
    [
      { path: '/createdAt', order: 'descending' }
      { path: '/campaignId', order: 'descending' }
    ]
    [
      { path: '/campaignId', order: 'ascending' }
      { path: '/kind', order: 'ascending' }
      { path: '/state', order: 'ascending' }
      { path: '/seq', order: 'ascending' }
    ]
  ]
}

resource containers 'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers@2025-10-15' = [
  for container in containerNames: {
    parent: database
    name: container
    properties: {
      resource: union(
        {
          id: container
          partitionKey: { paths: [container == 'campaigns' ? '/campaignId' : '/id'], kind: 'Hash' }
        },
        container == 'migrations' ? { indexingPolicy: migrationsIndexingPolicy } : {},
        container == 'campaigns' ? { indexingPolicy: campaignsIndexingPolicy } : {}
      )
    }
  }
]

// Built-in "Cosmos DB Built-in Data Contributor".
var dataContributor = '00000000-0000-0000-0000-000000000002'

resource dataAccess 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = {
  parent: account
  name: guid(account.id, principalKey, dataContributor)
  properties: {
    roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataContributor}'
    principalId: principalId
    scope: account.id
  }
}

// Data-plane and control-plane requests (who read or wrote what, from where) into resource-specific tables.
resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: account
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [
      { category: 'DataPlaneRequests', enabled: true }
      { category: 'ControlPlaneRequests', enabled: true }
      { category: 'QueryRuntimeStatistics', enabled: true }
    ]
  }
}

output name string = account.name
output endpoint string = account.properties.documentEndpoint
output databaseName string = databaseName
