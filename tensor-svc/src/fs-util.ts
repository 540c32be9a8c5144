/** Small helpers for file-system errors, shared by the store's parts. */
import { unlink } from 'node:fs/promises';

/** Whether `err` is a Node.js system error with one of `codes` (`ENOENT`, …). */
export function isErrno(err: unknown, ...codes: string[]): boolean {
  return codes.includes((err as NodeJS.ErrnoException)?.code ?? '');
}

/** Deletes a file; one that is already gone is fine. */
export async function unlinkQuiet(file: string): Promise<void> {
  await unlink(file).catch((err: unknown) => {
    if (!isErrno(err, 'ENOENT')) throw err;
  });
}
