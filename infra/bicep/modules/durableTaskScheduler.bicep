// The Durable Task Scheduler as the Durable Functions backend (main.bicep durableBackend =
// 'durableTaskScheduler'): a scheduler, the app's task hub, the app identity as Durable Task Data
// Contributor on the scheduler, and the app settings that point the Durable extension at it. The
// extension reaches it with the user-assigned identity; no key exists.
param name string
param location string
param tags object
@description('The task hub; host.json names it through ROUTELOCK_TASK_HUB, so the two must be the same.')
param taskHubName string
@allowed(['Dedicated', 'Consumption'])
@description('Dedicated: capacity units of up to 2,000 actions/s each; Consumption: pay per action, up to 500 actions/s.')
param skuName string
@minValue(1)
@description('Capacity units (Dedicated only; 3 or more for zone redundancy).')
param capacity int
@minLength(1)
@description('Addresses allowed to reach the scheduler. An empty list denies all traffic; the data plane needs an Entra token with a Durable Task role either way.')
param ipAllowlist array
@description('Object id of the app\'s identity.')
param principalId string
@description('A stable name for that principal, known before deployment: the role-assignment name derives from it.')
param principalKey string
@description('Client id of the app\'s user-assigned identity (ClientID= in the connection string).')
param identityClientId string

// Durable Task Data Contributor: every data action of the scheduler (Microsoft.DurableTask/*), which the
// Durable extension needs as client (start, query, purge) and as worker (dispatch, complete).
var durableTaskDataContributor = '0ad04412-c4d5-4796-b79c-f76d14c8d402'

resource scheduler 'Microsoft.DurableTask/schedulers@2025-11-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    ipAllowlist: ipAllowlist
    sku: skuName == 'Dedicated' ? { name: skuName, capacity: capacity } : { name: skuName }
  }

  resource taskHub 'taskHubs' = {
    name: taskHubName
  }
}

resource dataContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(scheduler.id, principalKey, durableTaskDataContributor)
  scope: scheduler
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', durableTaskDataContributor)
    principalId: principalId
    principalType: 'ServicePrincipal'
  }
}

output endpoint string = scheduler.properties.endpoint
output taskHubName string = scheduler::taskHub.name
// host.json is one file for both backends: these app settings override its durableTask storage provider
// (AzureFunctionsJobHost__<path> overrides the host.json value at <path>) only where this module deploys.
output appSettings object = {
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__type: 'azureManaged'
  AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName: 'DURABLE_TASK_SCHEDULER_CONNECTION_STRING'
  DURABLE_TASK_SCHEDULER_CONNECTION_STRING: 'Endpoint=${scheduler.properties.endpoint};Authentication=ManagedIdentity;ClientID=${identityClientId}'
}
