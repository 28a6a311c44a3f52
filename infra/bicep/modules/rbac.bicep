// Role assignments for the app's identity and, only when asked for, the deploying principal.
param storageAccountName string
param applicationInsightsName string
param principalId string
@description('A stable name for that principal, known before deployment (the identity\'s name): role-assignment names derive from it.')
param principalKey string
@description('Object id of the principal running the deployment (AZURE_PRINCIPAL_ID).')
param userPrincipalId string = ''
@description('What kind of principal userPrincipalId is (AZURE_PRINCIPAL_TYPE): a person, or a CI service principal.')
@allowed(['User', 'ServicePrincipal', 'Group'])
param userPrincipalType string = 'User'
@description('Give the deploying principal the app\'s data-plane roles on the host storage, for debugging. Blob Data Owner there is code execution (the deployment package and the host\'s keys live in it): leave false in production.')
param grantDeveloperDataAccess bool = false

var roles = {
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

var storageRoles = [roles.storageBlobDataOwner, roles.storageQueueDataContributor, roles.storageTableDataContributor]

resource storageAccess 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for role in storageRoles: {
    name: guid(storage.id, principalKey, role)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role)
      principalId: principalId
      principalType: 'ServicePrincipal'
    }
  }
]

var developerAccess = grantDeveloperDataAccess && !empty(userPrincipalId)

resource userStorageAccess 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for role in storageRoles: if (developerAccess) {
    name: guid(storage.id, userPrincipalId, role)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', role)
      principalId: userPrincipalId
      principalType: userPrincipalType
    }
  }
]

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(appInsights.id, principalKey, roles.monitoringMetricsPublisher)
  scope: appInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}
