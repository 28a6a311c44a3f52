import { type CosmosTestServer, startCosmosServer } from '../../testkit/cosmosServer';

/** The two Cosmos test servers a suite runs on: as it ships (bare ETags), and quoting them as Cosmos DB does. */
export interface CosmosServers {
  stock: CosmosTestServer;
  quoted: CosmosTestServer;
}

/** Start both servers before the file's tests and close them after (jest's beforeAll/afterAll). */
export function useCosmosServers(): CosmosServers {
  const servers = {} as CosmosServers;
  beforeAll(async () => {
    servers.stock = await startCosmosServer();
    servers.quoted = await startCosmosServer({ quotedEtags: true });
  });
  afterAll(async () => {
    await servers.stock?.close();
    await servers.quoted?.close();
  });
  return servers;
}
