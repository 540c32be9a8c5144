/**
 * Limits on what clients send, counted as the scheduler counts them.
 */
import { badField } from './proto-json.js';

/** Unicode code points in `s`: what the scheduler's prompt limit counts (not UTF-16 units). */
export function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Refuses a prompt longer than `max` code points with a 400 naming `field`. */
export function checkPromptLength(field: string, value: string, max: number): void {
  if (value.length <= max) return; // never more code points than UTF-16 units
  const n = codePoints(value);
  if (n > max) throw badField(field, `is ${n} characters long; the limit is ${max}`);
}
