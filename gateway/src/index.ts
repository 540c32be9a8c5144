// The public surface of @diffmesh/gateway.
export { GatewayConfigSchema, gatewayConfig, gatewayConfigFrom } from './config.js';
export type { GatewayConfig, GatewayConfigInput } from './config.js';
export { startGateway } from './server.js';
export type { RunningGateway, StartGatewayOptions } from './server.js';
export { RouteTable, matchTemplate, parseTemplate } from './routes.js';
export type { PathTemplate, ProtoRoute, RouteMatch } from './routes.js';
export { describeError, googleErrorBody, httpStatusOf, openAiErrorBody } from './errors.js';
export type { HttpError } from './errors.js';
export { formatTimestamp, jsonName, jsonToObject, messageToJson, protoRoot } from './proto-json.js';
export { openApiDocument } from './openapi.js';
export { ApiKeys, RateLimiter } from './auth.js';
