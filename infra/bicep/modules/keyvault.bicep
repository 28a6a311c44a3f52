// The vault that holds the fencing-token key set (ROUTELOCK_TOKEN_KEYS). RBAC mode only (no access
// policies), soft delete with purge protection, every operation logged to Log Analytics. The app's
// identity may read secrets (Key Vault Secrets User) and nothing else; no one else gets a data-plane
// role from this template. The app setting is a Key Vault reference resolved by the platform.
param name string
param location string
param tags object
@description('Principal (object) id of the app\'s user-assigned identity.')
param appPrincipalId string
@description('A stable name for that principal, known before deployment (the identity\'s name): role-assignment names derive from it.')
param appPrincipalKey string
param logAnalyticsWorkspaceId string
@description('Name of the secret that holds the key set JSON.')
param tokenKeysSecretName string = 'routelock-token-keys'
@secure()
@description('The key set JSON, base64-encoded. Empty: the secret and its versions are left as they are.')
param tokenKeysBase64 string = ''

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: { family: 'A', name: 'standard' }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    enablePurgeProtection: true
    enabledForDeployment: false
    enabledForDiskEncryption: false
    enabledForTemplateDeployment: false
    // Public endpoint, identities only, like the storage account and Cosmos DB in this template.
    publicNetworkAccess: 'Enabled'
    networkAcls: { defaultAction: 'Allow', bypass: 'AzureServices' }
  }
}

// Written only when a key set is passed (the first provision, or a deliberate replacement): a later
// deployment without one leaves the secret, its versions and any rotation done by hand untouched.
resource tokenKeysSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = if (!empty(tokenKeysBase64)) {
  parent: vault
  name: tokenKeysSecretName
  properties: {
    value: base64ToString(tokenKeysBase64)
    contentType: 'application/json'
    attributes: { enabled: true }
  }
}

// Built-in "Key Vault Secrets User": read secret values. Scoped to this vault only.
var keyVaultSecretsUser = '4633458b-17de-408a-b874-0445c86b69e6'

resource appSecretsUser 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, appPrincipalKey, keyVaultSecretsUser)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', keyVaultSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: vault
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [{ categoryGroup: 'allLogs', enabled: true }]
    metrics: [{ category: 'AllMetrics', enabled: true }]
  }
}

output name string = vault.name
output id string = vault.id
output tokenKeysSecretName string = tokenKeysSecretName
// The role assignment's id, so the app can depend on the grant existing before it resolves the reference.
output appSecretsUserAssignmentId string = appSecretsUser.id
