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
    ...extra,
  };
}

/** TLS material for service-to-service calls; absent = plaintext (loopback, private networks). */
export interface TlsFiles {
  /** PEM CA bundle that signed the peers' certificates. */
  ca: Buffer;
  /** This side's certificate chain and key (servers always; clients for mutual TLS). */
  cert?: Buffer;
  key?: Buffer;
}

export function serverCredentials(tls?: TlsFiles): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  if (!tls.cert || !tls.key) throw new Error('TLS server needs cert and key');
  return grpc.ServerCredentials.createSsl(tls.ca, [{ cert_chain: tls.cert, private_key: tls.key }], false);
}

export function clientCredentials(tls?: TlsFiles): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(tls.ca, tls.key ?? null, tls.cert ?? null);
}
