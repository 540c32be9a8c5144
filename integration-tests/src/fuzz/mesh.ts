// The mesh the fuzz suite attacks: every service in this process on its own loopback port
// (real gRPC and HTTP servers, found through a real nats-server), so that the suite can
// collect garbage and read the heap and tensor-svc's stored bytes before and after.
import * as grpc from '@grpc/grpc-js';
import { defaultModelsRoot } from '@diffmesh/models';
import { silentLogger, type Logger } from '@diffmesh/core';
import { loadDiffmeshProtos, type TensorServiceClient } from '@diffmesh/protos';
import { schedulerStub, type SchedulerStub } from '@diffmesh/client';
import { startNatsServer, type RunningNatsServer } from '@diffmesh/testing';
import { startTensorService, type RunningTensorService } from '@diffmesh/tensor-svc';
import { SchedulerConfigSchema, startSchedulerService, type RunningScheduler } from '@diffmesh/scheduler';
import { StageServiceConfigSchema, startStageService, type OnnxStageDeps, type RunningStageService } from '@diffmesh/stage-host';
import type { StageHandler } from '@diffmesh/core';
import { TextEncodingStage } from '@diffmesh/encoder-svc';
import { DenoisingStage } from '@diffmesh/dit-svc';
import { ImageEncodingStage, VaeDecodingStage } from '@diffmesh/vae-svc';
import { gatewayConfigFrom, startGateway, type RunningGateway } from '@diffmesh/gateway';
import { until } from '../harness.js';

export const FUZZ_MODEL = 'diffmesh/tiny-shapes';
export const FUZZ_KEY = 'dm-fuzz-key-0123456789abcdef';

/** The in-process mesh: its servers' addresses, clients, and what the suite measures. */
export interface FuzzMesh {
  nats: RunningNatsServer;
  tensor: RunningTensorService;
  stages: RunningStageService[];
  scheduler: RunningScheduler;
  gateway: RunningGateway;
  /** A typed scheduler client (for normal requests). */
  client: SchedulerStub;
  tensorClient: TensorServiceClient;
  /** Every gRPC server of the mesh by the services it hosts (fully qualified names). */
  grpcServers: Array<{ address: string; services: string[] }>;
  stop(): Promise<void>;
}

const STAGES: Array<{ name: string; pool: string; handler: (deps: OnnxStageDeps) => StageHandler }> = [
  { name: 'encoder-svc', pool: 'encoder-tiny', handler: (deps) => new TextEncodingStage({ ...deps, stage: 'text_encoding' }) },
  { name: 'dit-svc', pool: 'dit-tiny', handler: (deps) => new DenoisingStage({ ...deps, maxBatch: 8 }) },
  { name: 'vae-svc', pool: 'vae-tiny', handler: (deps) => new VaeDecodingStage(deps) },
  // tiny-shapes' image_encoding: requests whose input image is valid after all run to the end.
  { name: 'vae-svc', pool: 'vae-encoder-tiny', handler: (deps) => new ImageEncodingStage(deps) },
];

/** Starts nats-server, tensor-svc, the three tiny-shapes stages, the scheduler and the gateway, in this process. */
export async function startFuzzMesh(log: Logger = silentLogger()): Promise<FuzzMesh> {
  const nodeId = `fuzz-${process.pid}`;
  const nats = await startNatsServer({});
  const tensor = await startTensorService({ listen: '127.0.0.1:0', nodeId, log: { level: 'silent' } }, log);
  const stages: RunningStageService[] = [];
  for (const s of STAGES) {
    stages.push(
      await startStageService({
        name: s.name,
        version: '0.1.0',
        config: StageServiceConfigSchema.parse({
          pool: s.pool,
          nodeId,
          natsUrl: nats.url,
          tensorAddress: tensor.address,
          modelsDirs: [defaultModelsRoot()],
          models: [FUZZ_MODEL],
          threads: 1,
          capacity: 4,
          log: { level: 'silent' },
        }),
        log,
        createHandler: s.handler,
      }),
    );
  }
  const scheduler = await startSchedulerService(
    SchedulerConfigSchema.parse({ natsUrl: nats.url, tensorAddress: tensor.address, nodeId, log: { level: 'silent' } }),
    log,
    '0.1.0',
  );
  const gateway = await startGateway(
    gatewayConfigFrom({
      listen: '127.0.0.1:0',
      adminListen: '127.0.0.1:0',
      schedulerAddresses: [scheduler.address],
      tensorAddresses: [tensor.address],
      apiKeys: [FUZZ_KEY],
      nodeId,
      // The suite sends thousands of requests, some without a key: no limit may answer for the input.
      authFailuresPerMinute: 0,
      maxBodyBytes: 256 * 1024,
    }),
    log,
  );
  const client = schedulerStub(scheduler.address);
  const Tensor = loadDiffmeshProtos().diffmesh.tensor.v1.TensorService;
  const tensorClient = new Tensor(tensor.address, grpc.credentials.createInsecure());
  const health = 'grpc.health.v1.Health';
  const reflection = ['grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'];
  const mesh: FuzzMesh = {
    nats,
    tensor,
    stages,
    scheduler,
    gateway,
    client,
    tensorClient,
    grpcServers: [
      { address: scheduler.address, services: ['diffmesh.scheduler.v1.SchedulerService', health, ...reflection] },
      { address: tensor.address, services: ['diffmesh.tensor.v1.TensorService', health, ...reflection] },
      ...stages.map((s) => ({ address: s.address, services: ['diffmesh.stage.v1.StageService', health, ...reflection] })),
    ],
    async stop() {
      client.close();
      tensorClient.close();
      await gateway.stop(1000);
      await scheduler.stop(1000);
      for (const s of stages) await s.stop(1000);
      await tensor.stop(1000);
      await nats.stop();
    },
  };
  await until('the scheduler to see every stage pool', async () => {
    const pools = await scheduler.scheduler.pools();
    return STAGES.every((s) => pools.some((p) => p.pool === s.pool && p.instances.length > 0)) ? true : undefined;
  });
  return mesh;
}
