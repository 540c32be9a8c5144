import { invalidParameter } from '@diffmesh/core/client';

/** `--deadline 30s`: a duration from now (ms, s, m, h; a bare number is seconds) → an absolute time (ms since the epoch). */
export function parseDeadline(raw: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(raw);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m?.[2] ?? 's') as 'ms' | 's' | 'm' | 'h'];
  const ms = m ? Number(m[1]) * unit : NaN;
  if (!Number.isFinite(ms) || ms <= 0 || ms > 2 ** 31 - 1) {
    throw invalidParameter(
      'deadline',
      `expected a duration from now such as 30s, 2m or 1500ms (at most about 24 days), got ${JSON.stringify(raw)}`,
    );
  }
  return Date.now() + Math.round(ms);
}
