/**
 * Channel options and TLS credentials of gRPC clients and servers, without the config schema
 * (`options.ts`), so a client process loads no zod.
 */
import { readFileSync } from 'node:fs';
import { checkServerIdentity } from 'node:tls';
import * as grpc from '@grpc/grpc-js';

/** Largest gRPC message diffmesh sends or accepts (a 4 MiB tensor chunk plus framing fits). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * Channel options for clients and servers. The HTTP/2 flow-control window is the main
 * lever on grpc-js throughput for large tensors (2.5–3× over the default on loopback).
 */
export function channelOptions(extra: grpc.ChannelOptions = {}): grpc.ChannelOptions {
  return {
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
    'grpc-node.flow_control_window': 16 * 1024 * 1024,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    // No channelz bookkeeping (no channelz service is served): every call paid for it (a
    // Generate call is one per request; ~1% of the scheduler's CPU on that path).
    'grpc.enable_channelz': 0,
    ...extra,
  };
}

/** TLS material for service-to-service calls; absent = plaintext (loopback, private networks). */
export interface TlsFiles {
  /** PEM CA bundle that signed the peers' certificates (empty = system roots). */
  ca: Buffer;
  /** This side's certificate chain and key (servers always; clients for mutual TLS). */
  cert?: Buffer;
  key?: Buffer;
  /** Servers: require a client certificate signed by `ca`. */
  requireClientCert?: boolean;
  /**
   * Clients: the name the server's certificate must be valid for, instead of the address
   * dialled. Pods dial each other by IP, which a certificate from a cert-manager `Certificate`
   * cannot name; every certificate of the mesh then carries this DNS name.
   */
  serverName?: string;
}

export function serverCredentials(tls?: TlsFiles): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  if (!tls.cert || !tls.key) throw new Error('TLS server needs cert and key');
  const ca = tls.ca.length > 0 ? tls.ca : null;
  return grpc.ServerCredentials.createSsl(ca, [{ cert_chain: tls.cert, private_key: tls.key }], Boolean(tls.requireClientCert && ca));
}

export function clientCredentials(tls?: TlsFiles): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  const name = tls.serverName;
  return grpc.credentials.createSsl(
    tls.ca.length > 0 ? tls.ca : null,
    tls.key ?? null,
    tls.cert ?? null,
    name ? { checkServerIdentity: (_host, cert) => checkServerIdentity(name, cert) } : undefined,
  );
}

/** The file paths of a TLS section (a {@link TlsConfig} from `TlsConfigSchema`, `serverName` optional). */
export interface TlsFileSettings {
  ca: string;
  cert: string;
  key: string;
  requireClientCert: boolean;
  serverName?: string;
}

/**
 * Reads the PEM files of a TLS section; undefined when TLS is off (no cert and no CA).
 * A missing or unreadable file fails with a message naming the field.
 */
export function loadTlsFiles(cfg: TlsFileSettings): TlsFiles | undefined {
  if (!cfg.cert && !cfg.key && !cfg.ca) return undefined;
  if (Boolean(cfg.cert) !== Boolean(cfg.key)) throw new Error('config: tls.cert and tls.key must be given together');
  const read = (field: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`config: tls.${field}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  return {
    ca: cfg.ca ? read('ca', cfg.ca) : Buffer.alloc(0),
    ...(cfg.cert ? { cert: read('cert', cfg.cert), key: read('key', cfg.key) } : {}),
    requireClientCert: cfg.requireClientCert,
    ...(cfg.serverName ? { serverName: cfg.serverName } : {}),
  };
}
