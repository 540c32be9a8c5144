import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@diffmesh/core';
import { DIR_MARKER, StoreDirectories } from './store-directories.js';

const log = silentLogger();
const claimed: StoreDirectories[] = [];
const made: string[] = [];
afterEach(async () => {
  for (const d of claimed.splice(0)) await d.release(log);
  for (const dir of made.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** Claims `shmDir` as a store without a disk tier does (its spill directory is left alone). */
async function claim(shmDir: string): Promise<StoreDirectories> {
  const dirs = await StoreDirectories.claim({ shmDir, spillDir: path.join(shmDir, 'unused-spill'), spill: false });
  claimed.push(dirs);
  return dirs;
}

describe.skipIf(!existsSync('/proc/self/stat'))('taking over a directory left by a tensor-svc', () => {
  /** A directory as a tensor-svc that is gone left it: its marker says `marker`, and an object file remains. */
  async function leftDir(marker: string): Promise<string> {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-tensor-left-'));
    made.push(dir);
    await writeFile(path.join(dir, DIR_MARKER), marker);
    await writeFile(path.join(dir, 'r:x:1'), 'old');
    return dir;
  }
  /** Another live process (not a tensor-svc), and its start time as /proc tells it. */
  async function otherProcess(): Promise<{ pid: number; start: string; kill(): void }> {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    await once(child, 'spawn');
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
    return { pid: child.pid as number, start: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19], kill: () => child.kill() };
  }

  it('takes it over when the pid in its marker now belongs to another process', async () => {
    const other = await otherProcess();
    try {
      const dir = await leftDir(`${other.pid} 1\n`); // started 1 tick after boot: not that process
      await claim(dir);
      expect(readdirSync(dir).sort()).toEqual(['.incoming', '.meta', DIR_MARKER]);
      expect(readFileSync(path.join(dir, DIR_MARKER), 'utf8')).toMatch(new RegExp(`^${process.pid} \\d+\n$`));
    } finally {
      other.kill();
    }
  });

  it('refuses it while the process that wrote the marker runs', async () => {
    const other = await otherProcess();
    try {
      const dir = await leftDir(`${other.pid} ${other.start}\n`);
      await expect(claim(dir)).rejects.toThrow(`in use by another tensor-svc (pid ${other.pid})`);
      // A marker without a start time (an older tensor-svc): a live pid is the owner.
      const old = await leftDir(`${other.pid}\n`);
      await expect(claim(old)).rejects.toThrow(/in use by another tensor-svc/);
      expect(existsSync(path.join(dir, 'r:x:1'))).toBe(true);
    } finally {
      other.kill();
    }
  });
});
