/**
 * @diffmesh/client: the one scheduler client, used by the CLI, the gateway, benchmarks and
 * tests — Generate, Submit, Get, Watch, Cancel, ListModels and GetStatus over a pool of
 * schedulers with failover and re-attach by request id — plus the pool it runs on, the
 * Session stream client and the decoding of request events.
 */
export { connectionCause, describeUnreachable, isUnreachable, NO_UPSTREAM } from './connection-errors.js';
export { eventFromWire } from './events.js';
export { SchedulerClient } from './scheduler-client.js';
export type { CallOptions, EncodedResultFile, ResultOptions, SchedulerClientOptions, WatchOptions } from './scheduler-client.js';
export { SchedulerSession } from './session.js';
export type { SchedulerSessionOptions, SessionRequestHandle, SessionRequestHandlers, SessionRequestOptions } from './session.js';
export { schedulerStub } from './scheduler-stub.js';
export type { SchedulerStub } from './scheduler-stub.js';
export { UpstreamPool } from './upstream-pool.js';
export { backoffDelay, describeWait, isServiceUnreachable, Waiting } from './wait-policy.js';
export type { WaitNotice, WaitPolicy } from './wait-policy.js';
export type { UpstreamCallOptions, UpstreamPoolOptions } from './upstream-pool.js';
