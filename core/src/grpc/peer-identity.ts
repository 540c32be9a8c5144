import type { PeerCertificate } from 'node:tls';

/** URI SAN prefix of the identities diffmesh's own certificates carry (`urn:diffmesh:scheduler`). */
export const IDENTITY_URI_PREFIX = 'urn:diffmesh:';

/** Anything that answers `getAuthContext()`: every server-side call object of grpc-js. */
export interface CallWithAuthContext {
  getAuthContext(): { sslPeerCertificate?: PeerCertificate } | null;
}

/**
 * The identity of the client of a server-side call, from its **verified** client certificate
 * (mutual TLS): the first URI SAN `urn:diffmesh:<identity>` (e.g. `scheduler`, `gateway`,
 * `tensor-svc`, `stage:<pool>`, `client`), else the first other URI SAN as written, else the
 * subject CN. Undefined when the call is plaintext, when the client sent no certificate, or
 * when its certificate did not verify against the server's CA (grpc-js exposes only
 * authorized peers).
 *
 * This is the one place that names a caller; mapping identities to tenants or permissions is
 * the caller's job.
 */
export function peerIdentity(call: CallWithAuthContext): string | undefined {
  const cert = call.getAuthContext()?.sslPeerCertificate;
  return cert ? certificateIdentity(cert) : undefined;
}

/** The identity a certificate names (see {@link peerIdentity}). */
export function certificateIdentity(cert: Pick<PeerCertificate, 'subject' | 'subjectaltname'>): string | undefined {
  const uris = (cert.subjectaltname ?? '')
    .split(/,\s*/)
    .filter((entry) => entry.startsWith('URI:'))
    .map((entry) => entry.slice('URI:'.length));
  const own = uris.find((u) => u.startsWith(IDENTITY_URI_PREFIX));
  if (own) return own.slice(IDENTITY_URI_PREFIX.length);
  if (uris[0]) return uris[0];
  const cn = cert.subject?.CN;
  return (Array.isArray(cn) ? cn[0] : cn) || undefined;
}
