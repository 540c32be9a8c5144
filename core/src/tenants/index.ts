export { apiKeyHash, apiKeyOf, callCredentials, DEFAULT_TENANT, OPEN_TENANT, TenantDirectory } from './tenants.js';
export type { CallCredentials, Tenant, TenantLimits } from './tenants.js';
