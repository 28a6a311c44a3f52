// Storage for the Functions host (AzureWebJobsStorage), the Durable Functions task hub (queues and
// tables), the deployment package, and the migrations and campaigns queues. Shared-key access is off:
// identities only.
param name string
param location string
param tags object
param deploymentContainerName string
param logAnalyticsWorkspaceId string

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: 'Standard_LRS' }
  properties: {
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    dnsEndpointType: 'Standard'
    publicNetworkAccess: 'Enabled'
    networkAcls: { defaultAction: 'Allow', bypass: 'AzureServices' }
  }
}

resource blobs 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobs
  name: deploymentContainerName
}

resource queues 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource migrationsQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queues
  name: 'migrations'
}

resource migrationsPoisonQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queues
  name: 'migrations-poison'
}

// A message on `campaigns` starts a campaign (functions/campaignQueue.ts).
resource campaignsQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queues
  name: 'campaigns'
}

resource campaignsPoisonQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queues
  name: 'campaigns-poison'
}

// Durable Functions keeps its task hub in tables and queues.
resource tables 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

// Resource logs exist per service (blob, queue, table); the account itself only has metrics. Reads are
// logged too: the Durable task hub's tables and queues hold pre-lock tokens.
var storageLogs = [
  { category: 'StorageRead', enabled: true }
  { category: 'StorageWrite', enabled: true }
  { category: 'StorageDelete', enabled: true }
]
var storageMetrics = [{ category: 'Transaction', enabled: true }]

resource accountDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: storage
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    metrics: storageMetrics
  }
}

resource blobDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: blobs
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: storageLogs
    metrics: storageMetrics
  }
}

resource queueDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: queues
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: storageLogs
    metrics: storageMetrics
  }
}

resource tableDiagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: tables
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logs: storageLogs
    metrics: storageMetrics
  }
}

output name string = storage.name
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output queueEndpoint string = storage.properties.primaryEndpoints.queue
output tableEndpoint string = storage.properties.primaryEndpoints.table
