export { countsForBreaker, createBreaker } from './breaker.js';
export type { BreakerOptions, CircuitBreaker } from './breaker.js';
export { MAX_MESSAGE_BYTES, channelOptions, clientCredentials, serverCredentials } from './options.js';
export type { TlsFiles } from './options.js';
export { GrpcServer } from './server.js';
export type { GrpcServerOptions, ServiceBinding } from './server.js';
