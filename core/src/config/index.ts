export { ConfigError, defineConfig, formatConfigTable, formatIssue, listEnvVars, listFlags, loadConfig } from './config.js';
export type { ConfigDefinition, ConfigIssue, ConfigSource, ConfigSpec, EnvVarInfo, FlagInfo, LoadConfigOptions } from './config.js';
