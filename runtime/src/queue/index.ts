export { TASK_QUEUE_BACKENDS, TaskQueueConfigSchema, createTaskQueue } from './factory.js';
export type { CreateTaskQueueOptions, TaskQueueBackend, TaskQueueConfig, TaskQueueConfigInput } from './factory.js';
export { MemoryTaskQueue } from './memory.js';
export type { MemoryTaskQueueOptions } from './memory.js';
export type { EnqueueOptions, TaskQueue } from './types.js';
