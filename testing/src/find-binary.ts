import { constants as fsConstants } from 'node:fs';
import { access } from 'node:fs/promises';
import path from 'node:path';

/** Directories of system binaries that are often missing from a user's PATH. */
export const SYSTEM_BIN_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin', '/sbin'];

async function executable(p: string): Promise<boolean> {
  return access(p, fsConstants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * Finds an executable: a name with a `/` is used as a path; a bare name is looked up on
 * `PATH`, then in `extraDirs` (Debian puts servers such as nats-server in /usr/sbin).
 * Resolves `undefined` when there is none.
 */
export async function findBinary(binary: string, extraDirs: readonly string[] = SYSTEM_BIN_DIRS): Promise<string | undefined> {
  if (binary.includes('/') || binary.includes(path.sep)) return (await executable(binary)) ? binary : undefined;
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter).filter((d) => d.length > 0), ...extraDirs];
  for (const dir of dirs) {
    const candidate = path.join(dir, binary);
    if (await executable(candidate)) return candidate;
  }
  return undefined;
}
