/**
 * Exit statuses: 0 done; 1 the request failed or was cancelled; 2 bad input (a flag, an
 * unknown model or request id); 3 the mesh could not be reached; 130 interrupted (Ctrl-C).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3, interrupted: 130 } as const;
