import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodePng } from '@diffmesh/media';
import { get, startTestMesh, type TestMesh } from './harness.js';

// `diffmesh submit`, `watch` and `cancel`, each run as its own process against a mesh of
// separate processes, as an operator would from a shell.

const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

let t: TestMesh;
let dir: string;
beforeAll(async () => {
  t = await startTestMesh();
  dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-requests-cli-'));
}, 120_000);
afterAll(async () => {
  await t?.stop();
  await rm(dir, { recursive: true, force: true });
});

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args, '--remote', t.mesh.schedulerAddress],
      { cwd: dir, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

describe('diffmesh submit, watch and cancel', () => {
  it('submit prints the request id at once; watch follows it and writes the same picture generate --remote draws', async () => {
    const submitted = await cli('submit', 'a green square on a yellow background', '--seed', '11');
    expect(submitted.code).toBe(0);
    const reqId = submitted.stdout.trim();
    expect(reqId).toMatch(/^[0-9a-f-]{36}$/);

    const watched = await cli('watch', reqId, '-o', 'watched.png', '--no-progress');
    expect(watched.stderr).toBe('');
    expect(watched.code).toBe(0);
    expect(watched.stdout).toContain('completed; wrote watched.png (256×256, png)');
    expect((await get(t.client, reqId)).status).toBe('REQUEST_STATUS_COMPLETED');

    const generated = await cli(
      'generate',
      'a green square on a yellow background',
      '--seed',
      '11',
      '-o',
      'generated.png',
      '--no-progress',
    );
    expect(generated.code).toBe(0);
    const [a, b] = await Promise.all([readFile(path.join(dir, 'watched.png')), readFile(path.join(dir, 'generated.png'))]);
    expect(a.equals(b)).toBe(true);
    expect(decodePng(a)).toMatchObject({ width: 256, height: 256 });

    // Watching again replays the finished request from its first event.
    const again = await cli('watch', reqId, '--json', '--no-progress');
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ reqId, status: 'completed' });
  });

  it('submitting a request id again returns the same request', async () => {
    const first = await cli('submit', 'a red circle', '--request-id', 'cli-idempotent-1', '--json');
    const second = await cli('submit', 'a red circle', '--request-id', 'cli-idempotent-1', '--json');
    expect([first.code, second.code]).toEqual([0, 0]);
    expect(JSON.parse(first.stdout)).toMatchObject({ reqId: 'cli-idempotent-1', existing: false });
    expect(JSON.parse(second.stdout)).toMatchObject({ reqId: 'cli-idempotent-1', existing: true });
  });

  it('cancel stops a running request; watch then reports it cancelled with exit status 1', async () => {
    // Long enough to still be denoising when the cancel arrives.
    const submitted = await cli('submit', 'a purple circle', '--steps', '200', '--width', '512', '--height', '512', '--frames', '9');
    expect(submitted.code).toBe(0);
    const reqId = submitted.stdout.trim();
    await expect
      .poll(async () => (await get(t.client, reqId)).currentStage, { timeout: 30_000, interval: 20 })
      .toBe('STAGE_NAME_DENOISING');

    const cancelled = await cli('cancel', reqId);
    expect(cancelled).toMatchObject({ code: 0, stdout: 'cancelled\n' });
    expect((await get(t.client, reqId)).status).toBe('REQUEST_STATUS_CANCELLED');

    const watched = await cli('watch', reqId, '-o', 'never.png', '--no-progress');
    expect(watched.code).toBe(1);
    expect(watched.stderr).toContain('cancelled');
    await expect(readFile(path.join(dir, 'never.png'))).rejects.toThrow(/ENOENT/);
  });

  it('cancel of a finished request says how it ended and changes nothing', async () => {
    const reqId = (await cli('submit', 'a white triangle', '--steps', '2', '--width', '64', '--height', '64')).stdout.trim();
    expect((await cli('watch', reqId, '--no-progress')).code).toBe(0);
    expect(await cli('cancel', reqId)).toMatchObject({ code: 0, stdout: 'not cancelled: the request had already completed\n' });
    expect((await get(t.client, reqId)).status).toBe('REQUEST_STATUS_COMPLETED');
  });

  it('names an unknown request id or a bad flag and exits 2', async () => {
    for (const args of [
      ['watch', 'no-such-request'],
      ['cancel', 'no-such-request'],
    ]) {
      const r = await cli(...args);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('no-such-request');
    }
    const badSteps = await cli('submit', 'x', '--steps', 'many');
    expect(badSteps.code).toBe(2);
    expect(badSteps.stderr).toContain('(--steps)');
    const badTimeout = await cli('submit', 'x', '--timeout-ms', '99999999999');
    expect(badTimeout.code).toBe(2);
    expect(badTimeout.stderr).toContain('(--timeout-ms)');
    const badFolder = await cli('watch', 'no-such-request', '-o', path.join(dir, 'missing', 'x.png'));
    expect(badFolder.code).toBe(2);
    expect(badFolder.stderr).toContain('(--output)');
  });
});
