import { Code, DiffmeshError } from '@diffmesh/core/client';

/**
 * The cause of a failed connection in a few words, from grpc-js's transport message
 * (which runs to several lines: "No connection established. Last error: … Resolution
 * note: …").
 */
export function connectionCause(message: string): string {
  const m = message.toLowerCase();
  if (m.includes('econnrefused')) return 'connection refused';
  if (m.includes('enotfound') || m.includes('name resolution failed') || m.includes('dns resolution failed')) return 'unknown host';
  if (m.includes('ehostunreach') || m.includes('enetunreach')) return 'host unreachable';
  if (m.includes('etimedout') || m.includes('deadline')) return 'timed out';
  if (m.includes('econnreset') || m.includes('socket hang up')) return 'connection reset';
  if (m.includes('certificate') || m.includes('ssl') || m.includes('tls') || m.includes('handshake')) return 'TLS handshake failed';
  if (m.includes('no connection established') || m.includes('failed to connect')) return 'no connection';
  const first = message
    .split(/\r?\n/)[0]
    .replace(/\s*Resolution note:.*$/i, '')
    .trim();
  return first.length > 120 ? `${first.slice(0, 117)}…` : first;
}

/** Metadata key of the error a client raises itself when it knows no instance to call (not a server's answer). */
export const NO_UPSTREAM = 'no_upstream';

/**
 * Whether an error says the service itself could not be reached (a transport failure, or no
 * address known), as opposed to an answer of the service — such as a scheduler's
 * POOL_UNAVAILABLE for a stage pool without instances.
 */
export function isUnreachable(err: DiffmeshError): boolean {
  if (err.code !== Code.UNAVAILABLE) return false;
  return err.reason === 'TRANSPORT' || (err.reason === 'POOL_UNAVAILABLE' && err.metadata[NO_UPSTREAM] !== undefined);
}

/**
 * The one-line error for a service none of whose addresses answered: which addresses were
 * tried, why the connection failed, and what to check. UNAVAILABLE with reason `TRANSPORT`
 * (`POOL_UNAVAILABLE` when there was no address at all).
 */
export function describeUnreachable(service: string, addresses: readonly string[], err: DiffmeshError): DiffmeshError {
  if (addresses.length === 0) {
    return new DiffmeshError(Code.UNAVAILABLE, 'POOL_UNAVAILABLE', `no ${service} address is known (none configured and none discovered)`, {
      retryAfterMs: 1000,
      metadata: { [NO_UPSTREAM]: service },
    });
  }
  const where = addresses.length === 1 ? addresses[0] : `${addresses.slice(0, 3).join(', ')}${addresses.length > 3 ? ', …' : ''}`;
  const cause = connectionCause(err.message);
  const tls = cause === 'TLS handshake failed' ? ' (check the CA, certificate and key)' : '';
  return new DiffmeshError(
    Code.UNAVAILABLE,
    'TRANSPORT',
    `cannot reach the ${service} at ${where}: ${cause}${tls}; is it running and listening there?`,
    {
      retryAfterMs: 1000,
    },
  );
}
