import { spawn, execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { decodePng } from '@diffmesh/media';
import { writeTestLora } from '@diffmesh/models';
import { generate, last, startTestMesh, type TestMesh } from './harness.js';

const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

function run(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, cwd, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('diffmesh up', () => {
  it('starts a mesh, serves generate --remote and status, and stops every process on Ctrl-C', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-up-'));
    const env = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'mesh.json') };
    // An adapter folder the denoising stage serves (its adapters are shown by status).
    const loras = path.join(dir, 'loras');
    await mkdir(loras);
    await writeTestLora(path.join(loras, 'ink.safetensors'), { format: 'peft', crossAttentionDim: 16, seed: 3 });
    const up = spawn(process.execPath, [BIN, 'up', '--gateway-listen', '127.0.0.1:0', '--lora-dir', loras], {
      env: { ...env, DIFFMESH_API_KEY: 'test-key-123' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const lines: string[] = [];
      await new Promise<void>((resolve, reject) => {
        const rl = createInterface({ input: up.stdout });
        rl.on('line', (line) => {
          lines.push(line);
          if (line.startsWith('mesh ready')) resolve();
        });
        up.once('exit', (code) => reject(new Error(`diffmesh up exited with ${code}: ${lines.join('\n')}`)));
      });
      const nats = lines.find((l) => l.startsWith('nats '))?.split(' ')[1] ?? '';
      expect(nats).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
      const scheduler =
        lines
          .find((l) => l.startsWith('scheduler'))
          ?.split(' ')
          .at(-1) ?? '';
      expect(scheduler).toMatch(/^127\.0\.0\.1:\d+$/);

      // generate --remote ADDR, and --remote local (found through the state file)
      const a = await run(['generate', 'a red circle on a blue background', '--remote', scheduler, '--seed', '9', '-o', 'a.png'], env, dir);
      expect(a.stderr).not.toMatch(/diffmesh:/);
      expect(a.code).toBe(0);
      const b = await run(
        ['generate', 'a red circle on a blue background', '--remote', 'local', '--seed', '9', '-o', 'b.png', '--no-progress'],
        env,
        dir,
      );
      expect(b.code).toBe(0);
      const [pa, pb] = await Promise.all([readFile(path.join(dir, 'a.png')), readFile(path.join(dir, 'b.png'))]);
      expect(pa.equals(pb)).toBe(true);
      expect(decodePng(pa).width).toBe(256);
      // the same bytes as the embedded runtime
      const c = await run(['generate', 'a red circle on a blue background', '--seed', '9', '-o', 'c.png', '--no-progress'], env, dir);
      expect(c.code).toBe(0);
      expect(pa.equals(await readFile(path.join(dir, 'c.png')))).toBe(true);

      // The gateway of the mesh serves the OpenAI-compatible image endpoint with the API key.
      const gateway = lines.find((l) => l.startsWith('gateway '))?.split(' ')[1] ?? '';
      expect(gateway).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(lines).toContain('API key test-key-123 (from DIFFMESH_API_KEY)');
      const body = JSON.stringify({
        model: 'diffmesh/tiny-shapes',
        prompt: 'a red circle on a blue background',
        size: '256x256',
        response_format: 'b64_json',
        seed: 9,
      });
      const denied = await fetch(`${gateway}/v1/images/generations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      expect(denied.status).toBe(401);
      const res = await fetch(`${gateway}/v1/images/generations`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer test-key-123' },
        body,
      });
      expect(res.status).toBe(200);
      const json = (await res.json()) as { data: Array<{ b64_json: string }> };
      const png = Buffer.from(json.data[0].b64_json, 'base64');
      expect(decodePng(png).width).toBe(256);
      expect(png.equals(pa)).toBe(true); // same seed, same picture as the CLI through the scheduler

      const status = await run(['status'], env, dir);
      expect(status.code).toBe(0);
      for (const name of ['scheduler', 'encoder-svc', 'dit-svc', 'vae-svc']) expect(status.stdout).toMatch(new RegExp(`^${name}\\s`, 'm'));
      // --lora-dir reached the denoising stage: it holds none of the folder's one adapter yet.
      await expect
        .poll(async () => (await run(['status'], env, dir)).stdout.split('\n').find((l) => l.startsWith('dit-svc')), { timeout: 20_000 })
        .toMatch(/\s0\/1\s/);

      const state = JSON.parse(await readFile(path.join(dir, 'mesh.json'), 'utf8')) as { natsUrl: string };
      expect(state.natsUrl).toBe(nats);
      const pids = (await new Promise<string>((resolve) => execFile('pgrep', ['-P', String(up.pid)], (_e, out) => resolve(out))))
        .split('\n')
        .filter(Boolean)
        .map(Number);
      expect(pids.length).toBeGreaterThanOrEqual(7); // nats-server, tensor-svc, scheduler, 3 stages, gateway

      up.kill('SIGINT');
      const code = await new Promise<number | null>((resolve) => up.once('exit', resolve));
      expect(code).toBe(0);
      expect(pids.filter(alive)).toEqual([]);
      const after = await run(['status'], env, dir);
      expect(after.code).toBe(1);
      expect(after.stderr).toMatch(/no running mesh/);
    } finally {
      if (up.exitCode === null) up.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it('explains that a missing mesh cannot be reached', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-up-'));
    try {
      const env = { ...process.env, DIFFMESH_STATE_FILE: path.join(dir, 'none.json') };
      const r = await run(['generate', 'a red circle', '--remote', 'local', '-o', 'x.png'], env, dir);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/no running mesh found/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('graceful drain', () => {
  let t: TestMesh | undefined;
  afterEach(async () => {
    await t?.stop();
  });

  it('lets a DiT instance finish its task after SIGTERM, then exit 0', async () => {
    t = await startTestMesh({ capacities: { 'dit-svc': 1 } });
    const mesh = t.mesh;
    let terminated: Promise<number | NodeJS.Signals> | undefined;
    const events = await generate(
      t.client,
      { params: { prompt: 'a purple square', width: 64, height: 64, numInferenceSteps: 60 } },
      (e) => {
        if (e.type === 'progress' && e.stage === 'denoising' && e.step >= 3 && !terminated) {
          const dit = mesh.supervisor.get('dit-svc-1');
          dit?.child.kill('SIGTERM');
          terminated = dit?.exited;
        }
      },
    );
    expect(last(events).type).toBe('completed');
    // The instance finished the task it had (one attempt, all steps) before leaving.
    const starts = events.filter((e) => e.type === 'stage_started' && e.stage === 'denoising');
    expect(starts).toHaveLength(1);
    const steps = events.flatMap((e) => (e.type === 'progress' && e.stage === 'denoising' ? [e.step] : []));
    expect(steps.at(-1)).toBe(60);
    expect(await terminated).toBe(0);
  });
});

describe('one Ctrl-C in a terminal stops `diffmesh up`', () => {
  const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const script = path.join(repo, 'integration-tests/scripts/pty-interrupt.py');

  /** Runs `up` in a pseudo-terminal, types Ctrl-C once it is ready, and reports. */
  function interrupt(command: string[], stateFile: string): Promise<PtyReport> {
    return new Promise((resolve, reject) => {
      execFile(
        'python3',
        [script, stateFile, 'mesh ready', '120', '--', ...command],
        { cwd: repo, env: { ...process.env, DIFFMESH_STATE_FILE: stateFile }, timeout: 180_000, maxBuffer: 1 << 20 },
        (err, stdout, stderr) => {
          if (err) reject(new Error(`pty-interrupt.py failed: ${err.message}\n${stderr}`));
          else resolve(JSON.parse(stdout) as PtyReport);
        },
      );
    });
  }

  interface PtyReport {
    ready: boolean;
    exit_code: number | null;
    exit_signal: number | null;
    seconds_to_exit: number;
    pids: number[];
    left: number[];
    output: string;
  }

  /** The log folder `up` named in its ready line; every service drained once (no "second signal"). */
  async function drainedOnce(output: string): Promise<void> {
    const logDir = /logs in (\S+);/.exec(output)?.[1] ?? '';
    expect(logDir).not.toBe('');
    const { readdir } = await import('node:fs/promises');
    for (const file of await readdir(logDir)) {
      if (!file.endsWith('.log')) continue;
      const text = await readFile(path.join(logDir, file), 'utf8');
      expect(text, file).not.toMatch(/second signal/);
    }
    await rm(logDir, { recursive: true, force: true });
  }

  it('as node_modules/.bin/diffmesh up: exit status 0 within 10 s, no process of the mesh left', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-pty-'));
    try {
      const r = await interrupt(
        [path.join(repo, 'node_modules/.bin/diffmesh'), 'up', '--gateway-listen', '127.0.0.1:0'],
        path.join(dir, 'mesh.json'),
      );
      expect(r.ready, r.output).toBe(true);
      expect(r.pids.length).toBeGreaterThanOrEqual(8); // up, nats-server, tensor-svc, scheduler, 3 stages, gateway
      expect(r.exit_code, r.output).toBe(0);
      expect(r.seconds_to_exit).toBeLessThan(10);
      expect(r.left).toEqual([]);
      expect(r.output).toMatch(/stopping the mesh/);
      await drainedOnce(r.output);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 200_000);

  it('as npx diffmesh up: the prompt is back (npm ends with the signal) and no process of the mesh is left', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-pty-'));
    try {
      const r = await interrupt(['npx', 'diffmesh', 'up', '--gateway-listen', '127.0.0.1:0'], path.join(dir, 'mesh.json'));
      expect(r.ready, r.output).toBe(true);
      expect(r.pids.length).toBeGreaterThanOrEqual(8);
      // npm ends itself with SIGINT: the shell shows status 130.
      expect(r.exit_code === 130 || r.exit_signal === 2 || r.exit_code === 0).toBe(true);
      expect(r.seconds_to_exit).toBeLessThan(10);
      expect(r.left).toEqual([]);
      await drainedOnce(r.output);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 200_000);
});
