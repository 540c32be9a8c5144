export { ConfigError, defineConfig, formatConfigTable, formatIssue, listEnvVars, listFlags, loadConfig } from './config.js';
export type { ConfigDefinition, ConfigIssue, ConfigSource, ConfigSpec, EnvVarInfo, FlagInfo, LoadConfigOptions } from './config.js';
export { configArgs, kebabCase, schemaMappings, upperSnakeCase } from './config-fields.js';
export type { ConfigMappings, FieldNames } from './config-fields.js';
export type { ConfigPath, ConfigValues, LeafPaths } from './config-paths.js';
