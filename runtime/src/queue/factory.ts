import { z } from 'zod';
import { ConfigError } from '../config/index.js';
import { MemoryTaskQueue } from './memory.js';
import type { TaskQueue } from './types.js';

/** Task queue backends available in this build. */
export const TASK_QUEUE_BACKENDS = ['memory'] as const;
export type TaskQueueBackend = (typeof TASK_QUEUE_BACKENDS)[number];

/** Configuration of a pool's task queue; embed it in a service config schema. */
export const TaskQueueConfigSchema = z.object({
  backend: z
    .enum(TASK_QUEUE_BACKENDS, {
      error: (iss) =>
        `unknown task queue backend ${JSON.stringify(iss.input)} (available: ${TASK_QUEUE_BACKENDS.join(', ')})`,
    })
    .default('memory')
    .describe('Task queue backend'),
  maxLength: z.number().int().positive().default(1000).describe('Tasks a pool queue holds before new work is refused with QUEUE_FULL'),
  retryAfterMs: z
    .number()
    .int()
    .positive()
    .default(1000)
    .describe('Retry-After suggested on QUEUE_FULL before the drain rate is known'),
});
export type TaskQueueConfig = z.output<typeof TaskQueueConfigSchema>;
export type TaskQueueConfigInput = z.input<typeof TaskQueueConfigSchema>;

/** Non-configuration inputs of {@link createTaskQueue}. */
export interface CreateTaskQueueOptions {
  /** Queue name used in messages, usually the pool. */
  name?: string;
  /** Clock, for tests. */
  now?: () => number;
}

/**
 * Creates a task queue from configuration. Throws {@link ConfigError} for an unknown backend
 * or invalid settings.
 */
export function createTaskQueue<T>(config: TaskQueueConfigInput = {}, opts: CreateTaskQueueOptions = {}): TaskQueue<T> {
  const parsed = TaskQueueConfigSchema.safeParse(config);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => ({
        path: i.path.map(String).join('.'),
        source: opts.name ? `task queue ${opts.name}` : 'task queue config',
        message: i.message,
      })),
    );
  }
  const cfg = parsed.data;
  switch (cfg.backend) {
    case 'memory':
      return new MemoryTaskQueue<T>({ name: opts.name, maxLength: cfg.maxLength, retryAfterMs: cfg.retryAfterMs, now: opts.now });
  }
}
