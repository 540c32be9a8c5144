export {
  DEFAULT_REDACT_PATHS,
  LOG_LEVELS,
  LogConfigSchema,
  LogLevelSchema,
  createLogger,
  silentLogger,
  traceFieldsFromTraceparent,
  withContext,
} from './logger.js';
export type { LogConfig, LogContext, LogLevel, Logger, LoggerOptions } from './logger.js';
