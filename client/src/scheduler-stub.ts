import type * as grpc from '@grpc/grpc-js';
import { loadDiffmeshProtos, type GenerateRequest, type GenerateResponse__Output, type ListModelsResponse__Output } from '@diffmesh/protos';
import { channelOptions, clientCredentials, type TlsFiles } from '@diffmesh/core/client';

/**
 * The generated SchedulerService stub: one channel to one scheduler, every method as
 * grpc-js makes it, no failover. For tools and tests that exercise the wire itself (TLS
 * handshakes, raw status codes); applications use {@link SchedulerClient}.
 */
export interface SchedulerStub extends grpc.Client {
  Generate(req: GenerateRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<GenerateResponse__Output>;
  ListModels(
    req: object,
    options: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res?: ListModelsResponse__Output) => void,
  ): grpc.ClientUnaryCall;
  [method: string]: unknown;
}

/** A SchedulerService stub for `address`; `tls` for a mesh that serves TLS (plaintext otherwise). */
export function schedulerStub(address: string, tls?: TlsFiles): SchedulerStub {
  const Ctor = loadDiffmeshProtos().diffmesh.scheduler.v1.SchedulerService as unknown as new (
    address: string,
    creds: grpc.ChannelCredentials,
    options: grpc.ChannelOptions,
  ) => SchedulerStub;
  return new Ctor(address, clientCredentials(tls), channelOptions());
}
