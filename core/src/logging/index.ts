export {
  DEFAULT_REDACT_PATHS,
  LOG_LEVELS,
  LOG_FORMATS,
  createLogger,
  silentLogger,
  traceFieldsFromTraceparent,
  withContext,
} from './logger.js';
export type { LogContext, LogFormat, LogLevel, Logger, LoggerOptions } from './logger.js';
export { LogConfigSchema, logConfigMappings, LogLevelSchema } from './log-config.js';
export type { LogConfig } from './log-config.js';
