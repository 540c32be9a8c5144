export { advertisedAddress, hostOf, isWildcardHost } from './advertise.js';
export type { AdvertiseInput } from './advertise.js';
export { countsForBreaker, createBreaker } from './breaker.js';
export type { BreakerOptions, CircuitBreaker } from './breaker.js';
export {
  MAX_MESSAGE_BYTES,
  TlsConfigSchema,
  channelOptions,
  clientCredentials,
  loadTlsFiles,
  serverCredentials,
  tlsConfigMappings,
} from './options.js';
export type { TlsConfig, TlsFiles } from './options.js';
export { IDENTITY_URI_PREFIX, certificateIdentity, peerIdentity } from './peer-identity.js';
export type { CallWithAuthContext } from './peer-identity.js';
export { GrpcServer } from './server.js';
export { REFLECTION_SERVICE_NAMES, ReflectionService, defaultDescriptorRegistry, type ReflectionServiceOptions } from './reflection.js';
export { MalformedRequest, malformedRequestError } from './request-decoding.js';
export { MAX_REPEATED_ELEMENTS, MAX_WIRE_DEPTH, checkWire, type WireProblem } from './wire-check.js';
export type { GrpcServerOptions, ServiceBinding } from './server.js';
