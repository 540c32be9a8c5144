export { EMBEDDED_LIMITS, startEmbedded } from './embedded.js';
export type { Embedded, EmbeddedOptions } from './embedded.js';
export { generate, planOutput } from './generate.js';
export type { GenerateArgs, GenerateOutcome, OutputPlan } from './generate.js';
export { EXIT, main } from './main.js';
export { parseProviderSpec, REPLICA_SERVICES, serviceEntry, startLocalMesh, waitForInstance } from './mesh/local-mesh.js';
export type { LocalMesh, LocalMeshOptions, ReplicaService, SchedulerProcessSpec, StageProcessSpec } from './mesh/local-mesh.js';
export { generateRemote } from './remote.js';
