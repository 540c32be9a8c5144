/** Listen addresses of the gateway's HTTP listeners: binding one, and writing the address bound. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The host and port a listener is bound to. */
export interface BoundAddress {
  host: string;
  port: number;
}

function parseListen(listen: string): BoundAddress {
  const i = listen.lastIndexOf(':');
  return { host: listen.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(listen.slice(i + 1)) };
}

/** Binds `server` to `addr` (`host:port`, port 0 = any free port); resolves with the address bound. */
export function listen(server: Server, addr: string): Promise<BoundAddress> {
  const { host, port } = parseListen(addr);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const a = server.address() as AddressInfo;
      resolve({ host: a.address, port: a.port });
    });
  });
}

/** `host:port`, with an IPv6 host in brackets. */
export const hostPort = ({ host, port }: BoundAddress): string => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/** `http://host:port`. */
export const urlOf = (addr: BoundAddress): string => `http://${hostPort(addr)}`;
