// main.bicep with durableBackend = 'durableTaskScheduler', compiled by `npm run infra:build` beside
// main.bicep so that both Durable backends are type-checked and test/infra.test.ts reads each compiled
// template. azd deploys main.bicep; choose the backend there with ROUTELOCK_DURABLE_BACKEND.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
param environmentName string

@minLength(1)
param location string

@minLength(2)
param cosmosLocations array

@minLength(36)
@maxLength(36)
param entraClientId string

module main 'main.bicep' = {
  name: 'main'
  params: {
    environmentName: environmentName
    location: location
    cosmosLocations: cosmosLocations
    entraClientId: entraClientId
    durableBackend: 'durableTaskScheduler'
  }
}
