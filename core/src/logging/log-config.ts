import { z } from 'zod';
import { LOG_FORMATS, LOG_LEVELS } from './logger.js';

/** Zod schema of a log level, for service config schemas. */
export const LogLevelSchema = z.enum(LOG_LEVELS);

/** Zod schema of the `log` section of a service config. */
export const LogConfigSchema = z.object({
  /** Minimum level written. */
  level: LogLevelSchema.default('info').describe('Minimum log level'),
  /** Human-readable lines instead of JSON (for terminals, not for log shippers). */
  pretty: z.boolean().default(false).describe('Human-readable log lines instead of JSON (same as format pretty)'),
  /** `json`: one JSON object a line, for log shippers; `pretty`: human-readable lines, for a terminal. */
  format: z
    .enum(LOG_FORMATS)
    .default('json')
    .describe('log line format: json (one JSON object a line, for log shippers) or pretty (human-readable, for a terminal)'),
});
export type LogConfig = z.output<typeof LogConfigSchema>;

/** The env variables and flags of the `log` section every service takes (`LOG_LEVEL`, `--log-level`, …). */
export function logConfigMappings(): { env: Record<string, `log.${keyof LogConfig}`>; flags: Record<string, `log.${keyof LogConfig}`> } {
  return {
    env: { LOG_LEVEL: 'log.level', LOG_FORMAT: 'log.format' },
    flags: { 'log-level': 'log.level', 'log-format': 'log.format' },
  };
}
