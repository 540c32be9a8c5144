export { startMetricsEndpoint } from './endpoint.js';
export type { MetricsEndpoint, MetricsSource } from './endpoint.js';
export { StageMetrics } from './stage.js';
export type { ModelRunObserver, StageMetricsOptions, StageTaskOutcome } from './stage.js';
