import cosmosServer from '@vercel/cosmosdb-server';
import type { AddressInfo } from 'node:net';
import { CosmosStore } from '../shared/store/cosmos/locations';

/**
 * A Cosmos DB wire-protocol server (@vercel/cosmosdb-server) on a free loopback port, HTTPS with its
 * self-signed certificate. ETags, 404/409/412 behave as the real service does.
 */
export interface CosmosTestServer {
  endpoint: string;
  key: string;
  connect(container?: string): Promise<CosmosStore>;
  close(): Promise<void>;
}

let containers = 0;

export async function startCosmosServer(): Promise<CosmosTestServer> {
  const server = cosmosServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const endpoint = `https://127.0.0.1:${port}`;
  const key = Buffer.from('routelock-test-key').toString('base64');
  const stores: CosmosStore[] = [];
  return {
    endpoint,
    key,
    async connect(container = `locations${++containers}`) {
      const store = await CosmosStore.connect({
        endpoint,
        key,
        disableTlsVerify: true,
        database: 'routelock',
        container,
      });
      stores.push(store);
      return store;
    },
    async close() {
      await Promise.all(stores.map((s) => s.close()));
      await new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      });
    },
  };
}
