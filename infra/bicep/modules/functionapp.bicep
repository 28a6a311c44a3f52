// The Function App on Flex Consumption (FC1), Node, with the user-assigned identity. Every connection is
// identity-based (`__credential: managedidentity`, `__clientId`); no key or keyed connection string.
param name string
param planName string
param location string
param tags object
param identityResourceId string
param identityClientId string
param storageAccountName string
param storageBlobEndpoint string
param storageQueueEndpoint string
param storageTableEndpoint string
param deploymentContainerName string
param applicationInsightsConnectionString string
param maximumInstanceCount int
param instanceMemoryMB int = 2048
@description('The ROUTELOCK_* and COSMOS_* settings (see main.bicep).')
param appSettings object

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: { name: 'FC1', tier: 'FlexConsumption' }
  properties: { reserved: true }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identityResourceId}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storageBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityResourceId
          }
        }
      }
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
      }
      runtime: { name: 'node', version: '20' }
    }
  }

  resource settings 'config' = {
    name: 'appsettings'
    properties: union(appSettings, {
      // Functions host storage, Durable Functions task hub, the migrations queues: identity-based.
      AzureWebJobsStorage__accountName: storageAccountName
      AzureWebJobsStorage__blobServiceUri: storageBlobEndpoint
      AzureWebJobsStorage__queueServiceUri: storageQueueEndpoint
      AzureWebJobsStorage__tableServiceUri: storageTableEndpoint
      AzureWebJobsStorage__credential: 'managedidentity'
      AzureWebJobsStorage__clientId: identityClientId
      // DefaultAzureCredential picks the user-assigned identity by this id.
      AZURE_CLIENT_ID: identityClientId
      // Application Insights: Entra-only ingestion (local auth is off on the component).
      APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
      APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
    })
  }
}

output name string = app.name
output uri string = 'https://${app.properties.defaultHostName}'
