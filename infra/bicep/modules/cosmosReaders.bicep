// Services that link @routelock/library and resolve routes by reading the routing store themselves
// (docs/services.md): the Cosmos DB Built-in Data Reader role on the locations
// container, and nothing else. A reader cannot write a route or a lock, whatever the library is told,
// so linking the library never bypasses the API's app roles; only routelock's own identity writes.
param accountName string
param databaseName string
param containerName string = 'locations'
@description('Object ids of the reading services\' identities (managed identities or service principals).')
param principalIds array

resource account 'Microsoft.DocumentDB/databaseAccounts@2025-10-15' existing = {
  name: accountName
}

// Built-in "Cosmos DB Built-in Data Reader": read items, query, read the change feed; no write.
var dataReader = '00000000-0000-0000-0000-000000000001'

// One at a time: Cosmos DB takes one control-plane write per account at once, and parallel role
// assignments fail with 412 "another operation is in progress".
@batchSize(1)
resource readers 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2025-10-15' = [
  for principalId in principalIds: {
    parent: account
    name: guid(account.id, principalId, dataReader, containerName)
    properties: {
      roleDefinitionId: '${account.id}/sqlRoleDefinitions/${dataReader}'
      principalId: principalId
      scope: '${account.id}/dbs/${databaseName}/colls/${containerName}'
    }
  }
]
