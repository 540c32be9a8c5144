import type { Logger } from '../logging/index.js';

/** True for a host that binds every interface: `0.0.0.0`, `::`, `[::]` or empty. */
export function isWildcardHost(host: string): boolean {
  return host === '' || host === '0.0.0.0' || host === '::' || host === '[::]';
}

/** `host:port` split at the port's colon; `[v6]:port` keeps its brackets; a bare IPv6 address has no port. */
function splitHostPort(address: string): { host: string; port: string } {
  if (address.startsWith('[')) {
    const end = address.indexOf(']');
    return { host: address.slice(0, end + 1), port: address.slice(end + 2) };
  }
  const colons = address.split(':').length - 1;
  if (colons > 1) return { host: `[${address}]`, port: '' };
  const at = address.lastIndexOf(':');
  return at === -1 ? { host: address, port: '' } : { host: address.slice(0, at), port: address.slice(at + 1) };
}

/** The host of a `host:port` listen address (brackets of an IPv6 host kept). */
export function hostOf(address: string): string {
  return splitHostPort(address).host;
}

/** What a service listens on and what it was told to advertise, for {@link advertisedAddress}. */
export interface AdvertiseInput {
  /** The configured listen address (`host:port`). */
  listen: string;
  /** The address actually bound (a server's `address`: port resolved, a wildcard host shown as 127.0.0.1). */
  bound: string;
  /** `--advertise-address`: `host:port`, or `host` / `host:0` for the bound port; empty = the bound address. */
  advertise: string;
}

/**
 * The address a service registers in discovery and writes into what peers dial: the
 * advertise address (with the bound port when it names none or port 0), else the bound
 * address. A service bound to a wildcard (`0.0.0.0:7000`) without an advertise address can
 * only register a loopback address, which peers on other nodes cannot reach: `log` gets a
 * warning saying so.
 */
export function advertisedAddress(input: AdvertiseInput, log?: Logger): string {
  const bound = splitHostPort(input.bound);
  if (input.advertise === '') {
    if (isWildcardHost(hostOf(input.listen)))
      log?.warn(
        { listen: input.listen, advertised: input.bound },
        'listening on every interface without --advertise-address: peers on other nodes cannot reach the loopback address registered; set --advertise-address to the address of this node',
      );
    return input.bound;
  }
  const a = splitHostPort(input.advertise);
  return `${a.host}:${a.port === '' || a.port === '0' ? bound.port : a.port}`;
}
