import { createServer } from 'node:net';

/**
 * A port free on loopback now (the OS picks it), for a process that must be told its port before it
 * starts (start:functions' front door, which cannot listen on 0: its listener prefix and the durable
 * client's URLs need the number).
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}
