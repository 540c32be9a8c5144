import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { MeshState } from '@diffmesh/cli';

/** The `diffmesh` command as users run it. */
export const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

/** A `diffmesh up` child process with a state file of its own. */
export interface UpProcess {
  proc: ChildProcess;
  /** The environment that finds this mesh (`DIFFMESH_STATE_FILE`). */
  env: NodeJS.ProcessEnv;
  /** Its folder: the state file and, unless `--insecure`, `credentials/`. */
  dir: string;
  /** Every line it printed, stdout and stderr. */
  lines: string[];
  /** The state file it wrote. */
  state(): Promise<MeshState & { schedulerAddresses: string[]; processes: NonNullable<MeshState['processes']> }>;
  /** Ctrl-C (unless it has exited), then removes its folder. */
  stop(): Promise<void>;
}

/** Starts `diffmesh up ARGS` and resolves once it printed `mesh ready`; rejects with its output if it exits first. */
export async function startUp(args: string[], prefix = 'diffmesh-up-'): Promise<UpProcess> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  const env = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'mesh.json') };
  const proc = spawn(process.execPath, [BIN, 'up', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const up: UpProcess = {
    proc,
    env,
    dir,
    lines,
    state: async () => JSON.parse(await readFile(path.join(dir, 'mesh.json'), 'utf8')) as Awaited<ReturnType<UpProcess['state']>>,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.kill('SIGINT');
        await new Promise((r) => proc.once('exit', r));
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
  createInterface({ input: proc.stderr }).on('line', (l) => lines.push(l));
  try {
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: proc.stdout }).on('line', (l) => {
        lines.push(l);
        if (l.startsWith('mesh ready')) resolve();
      });
      proc.once('exit', (code) => reject(new Error(`diffmesh up exited with ${code}:\n${lines.join('\n')}`)));
    });
  } catch (err) {
    await up.stop();
    throw err;
  }
  return up;
}

/** Runs `diffmesh ARGS` to its end. */
export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  opts: { cwd?: string; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env, timeout: opts.timeoutMs ?? 120_000, ...(opts.cwd ? { cwd: opts.cwd } : {}) },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
  });
}
