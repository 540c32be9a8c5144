export {
  DEFAULT_REDACT_PATHS,
  LOG_LEVELS,
  LOG_FORMATS,
  LogConfigSchema,
  logConfigMappings,
  LogLevelSchema,
  createLogger,
  silentLogger,
  traceFieldsFromTraceparent,
  withContext,
} from './logger.js';
export type { LogConfig, LogContext, LogFormat, LogLevel, Logger, LoggerOptions } from './logger.js';
