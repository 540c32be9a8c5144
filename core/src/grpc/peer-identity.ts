import type { PeerCertificate } from 'node:tls';

/** URI SAN prefix of the identities diffmesh's own certificates carry (`urn:diffmesh:scheduler`). */
export const IDENTITY_URI_PREFIX = 'urn:diffmesh:';

/** Anything that answers `getAuthContext()`: every server-side call object of grpc-js. */
export interface CallWithAuthContext {
  getAuthContext(): { sslPeerCertificate?: PeerCertificate } | null;
}

/**
 * The identity of the client of a server-side call, from its **verified** client certificate
 * (mutual TLS): its URI SAN `urn:diffmesh:<identity>` as written (e.g. `urn:diffmesh:scheduler`,
 * `urn:diffmesh:gateway`, `urn:diffmesh:tensor-svc`, `urn:diffmesh:stage:<pool>`,
 * `urn:diffmesh:client`: what diffmesh's certificates carry), else its first other URI SAN
 * (`spiffe://…`), else its subject CN. Undefined when the call is plaintext, when the client sent
 * no certificate, or when its certificate did not verify against the server's CA (grpc-js
 * exposes only authorized peers).
 *
 * This is the one place that names a caller (the tenants file's `identities` use the same
 * form); mapping identities to tenants or permissions is the caller's job.
 */
export function peerIdentity(call: CallWithAuthContext): string | undefined {
  const cert = call.getAuthContext()?.sslPeerCertificate;
  return cert ? certificateIdentity(cert) : undefined;
}

/** The identity a certificate names (see {@link peerIdentity}). */
export function certificateIdentity(cert: {
  subject?: { CN?: string | string[] };
  subjectaltname?: string | undefined;
}): string | undefined {
  const uris = (cert.subjectaltname ?? '')
    .split(/,\s*/)
    .filter((entry) => entry.startsWith('URI:'))
    .map((entry) => entry.slice('URI:'.length));
  const uri = uris.find((u) => u.startsWith(IDENTITY_URI_PREFIX)) ?? uris[0];
  if (uri) return uri;
  const cn = cert.subject?.CN;
  return (Array.isArray(cn) ? cn[0] : cn) || undefined;
}
