import { AsyncLocalStorage } from 'node:async_hooks';
import type { PutOptions } from './tensor-store.js';

/**
 * Put options that apply to every put made inside a piece of work without its code passing
 * them: a stage service runs the task of a plan's last stage inside
 * `withPutOptions({ finalResult: true }, …)`, so the outputs the stage stores are marked as the
 * request's result whatever store call the stage makes.
 */
const scope = new AsyncLocalStorage<PutOptions>();

/** Runs `fn` with `opts` applying to the puts it makes (nested scopes add to outer ones). */
export function withPutOptions<T>(opts: PutOptions, fn: () => T): T {
  const outer = scope.getStore();
  return scope.run(outer ? { ...outer, ...opts } : opts, fn);
}

/** The options of a put: the scope's, overridden by the caller's own. */
export function scopedPutOptions(opts?: PutOptions): PutOptions {
  const scoped = scope.getStore();
  return scoped ? { ...scoped, ...opts } : (opts ?? {});
}
