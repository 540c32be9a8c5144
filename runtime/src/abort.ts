/** An abort signal that follows a parent and fires on its own after a timeout. */
export interface LinkedAbort {
  readonly signal: AbortSignal;
  /** True when the timeout (not the parent) aborted it. */
  timedOut(): boolean;
  /** Stops following the parent and clears the timer; call when the work is done. */
  dispose(): void;
}

/**
 * Like `AbortSignal.any([parent, AbortSignal.timeout(ms)])`, without the per-call cost of
 * those on hot paths (a DOMException and weak-reference bookkeeping per signal on Node 20):
 * one controller, one listener and one timer, all released by `dispose()`.
 */
export function linkedAbort(parent: AbortSignal, timeoutMs: number): LinkedAbort {
  const controller = new AbortController();
  let timedOut = false;
  const onParent = (): void => controller.abort(parent.reason);
  if (parent.aborted) onParent();
  else parent.addEventListener('abort', onParent, { once: true });
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          timedOut = true;
          controller.abort(new Error(`timed out after ${timeoutMs} ms`));
        }, timeoutMs)
      : undefined;
  timer?.unref();
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    dispose() {
      parent.removeEventListener('abort', onParent);
      if (timer) clearTimeout(timer);
    },
  };
}
