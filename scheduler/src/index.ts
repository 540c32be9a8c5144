export { EventLog } from './event-log.js';
export { LocalInstance } from './local-instance.js';
export { Scheduler } from './scheduler.js';
export type { QueuedTask, SchedulerLimits, SchedulerOptions } from './scheduler.js';
export { isTerminal } from './types.js';
export type {
  ExecuteHooks,
  GenerateRequest,
  RequestEvent,
  RequestState,
  StageInstance,
  StageTiming,
} from './types.js';
