import { z } from 'zod';

export { MAX_MESSAGE_BYTES, channelOptions, clientCredentials, loadTlsFiles, serverCredentials } from './channel.js';
export type { TlsFileSettings, TlsFiles } from './channel.js';

/** TLS settings of a service, as files (PEM). Empty `cert` and `key` = plaintext. */
export const TlsConfigSchema = z.object({
  ca: z
    .string()
    .default('')
    .describe('PEM CA bundle that signed the peers (empty = system roots for clients; no client-certificate check for servers)'),
  cert: z.string().default('').describe('PEM certificate chain of this service (server side, and client side for mutual TLS)'),
  key: z.string().default('').describe('PEM private key of `cert`'),
  requireClientCert: z.boolean().default(false).describe('servers ask clients for a certificate signed by `ca` (mutual TLS)'),
  serverName: z
    .string()
    .default('')
    .describe("clients: the DNS name peers' certificates must carry, instead of the address dialled (empty = the address)"),
});
export type TlsConfig = z.output<typeof TlsConfigSchema>;

/** The env suffixes and flags of a TLS section placed at `prefix` (e.g. `tls`). */
export function tlsConfigMappings<P extends string = 'tls'>(
  prefix: P = 'tls' as P,
): { env: Record<string, `${P}.${keyof TlsConfig}`>; flags: Record<string, `${P}.${keyof TlsConfig}`> } {
  return {
    env: {
      TLS_CA: `${prefix}.ca`,
      TLS_CERT: `${prefix}.cert`,
      TLS_KEY: `${prefix}.key`,
      TLS_REQUIRE_CLIENT_CERT: `${prefix}.requireClientCert`,
      TLS_SERVER_NAME: `${prefix}.serverName`,
    },
    flags: {
      'tls-ca': `${prefix}.ca`,
      'tls-cert': `${prefix}.cert`,
      'tls-key': `${prefix}.key`,
      'tls-require-client-cert': `${prefix}.requireClientCert`,
      'tls-server-name': `${prefix}.serverName`,
    },
  };
}
