// The Function App on Flex Consumption (FC1), Node, with the user-assigned identity. Every connection is
// identity-based (`__credential: managedidentity`, `__clientId`); no key or keyed connection string.
// App Service authentication (Easy Auth) with Microsoft Entra ID rejects every request without a valid
// access token or session for the API (401) before it reaches the Functions host, except the health
// probe and the status page (which sends a browser to /.auth/login/aad itself).
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
@description('The Durable backend\'s settings (Azure Storage: its queues\' visibility timeouts, main.bicep; the scheduler: modules/durableTaskScheduler.bicep).')
param durableSettings object = {}
param logAnalyticsWorkspaceId string
@description('Application (client) id of the routelock API app registration.')
param entraClientId string
param entraTenantId string
@description('Token audiences the API accepts.')
param entraAudiences array
@description('Paths served without authentication.')
param unauthenticatedPaths array = ['/api/health']
@description('Pages a person opens in a browser: excluded from the 401 so the app can send a caller with no identity to sign in (functions/http/signIn.ts); App Service still validates the session and strips forged principals there.')
param browserPagePaths array = ['/api/status']

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
    // Key Vault references (ROUTELOCK_TOKEN_KEYS) resolve with the user-assigned identity.
    keyVaultReferenceIdentity: identityResourceId
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      // No ftpsState: FTP(S) does not exist on Flex Consumption and the property is listed among the
      // plan's deprecated site properties ("FTPS not supported"); basic-auth FTP is also off below.
    }
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
      // Node 20 left Functions support in April 2026.
      runtime: { name: 'node', version: '22' }
    }
  }

  // After authsettingsV2: the app starts with its settings only once authentication is on (under
  // ROUTELOCK_AUTH=appservice it refuses to start without it).
  resource settings 'config' = {
    name: 'appsettings'
    dependsOn: [auth]
    properties: union(appSettings, durableSettings, {
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
      // The host refuses a larger request body itself (bytes; its default is 100 MB), chunked ones
      // included, so what reaches Node is within the app's 64 KiB cap (functions/http/validation.ts).
      FUNCTIONS_REQUEST_BODY_SIZE_LIMIT: '65536'
    })
  }

  // Publishing with a user name and password (FTP, and the SCM/Kudu site): off. azd and the portal
  // deploy with Entra tokens.
  resource ftpPublishing 'basicPublishingCredentialsPolicies' = {
    name: 'ftp'
    properties: { allow: false }
  }

  resource scmPublishing 'basicPublishingCredentialsPolicies' = {
    name: 'scm'
    properties: { allow: false }
  }

  // Built-in authentication: a valid Entra access token for this API (issuer = the tenant, audience =
  // one of entraAudiences) or a session from a browser sign-in, else 401. Roles in the token decide what
  // the caller may do (the app checks them on each route). Browser sign-in (the status page) is the
  // server-directed flow at /.auth/login/aad with no client secret: OpenID Connect returning an ID token
  // (the app registration needs ID tokens enabled and the /.auth/login/aad/callback redirect URI; see
  // docs/operators.md, "The status page"), then App Service's own session cookie. No token store: nothing holds the tokens.
  // post_login_redirect_uri may name only this app (no external URL is allowed), and the page's #filters
  // survive the round trip.
  resource auth 'config' = {
    name: 'authsettingsV2'
    properties: {
      platform: { enabled: true }
      globalValidation: {
        requireAuthentication: true
        unauthenticatedClientAction: 'Return401'
        excludedPaths: concat(unauthenticatedPaths, browserPagePaths)
      }
      httpSettings: { requireHttps: true }
      login: {
        tokenStore: { enabled: false }
        allowedExternalRedirectUrls: []
        preserveUrlFragmentsForLogins: true
      }
      identityProviders: {
        azureActiveDirectory: {
          enabled: true
          registration: {
            clientId: entraClientId
            // https://login.microsoftonline.com/<tenant>/v2.0 in the public cloud
            openIdIssuer: '${environment().authentication.loginEndpoint}${entraTenantId}/v2.0'
          }
          validation: { allowedAudiences: entraAudiences }
        }
      }
    }
  }
}

resource diagnostics 'Microsoft.Insights/diagnosticSettings@2021-05-01-preview' = {
  name: 'to-log-analytics'
  scope: app
  properties: {
    workspaceId: logAnalyticsWorkspaceId
    logAnalyticsDestinationType: 'Dedicated'
    logs: [{ category: 'FunctionAppLogs', enabled: true }]
    metrics: [{ category: 'AllMetrics', enabled: true }]
  }
}

output name string = app.name
output uri string = 'https://${app.properties.defaultHostName}'
