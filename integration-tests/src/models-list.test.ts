/**
 * ListModels and /v1/models say which models the mesh can serve now and which are only
 * registered plans, and follow instances as they come and go.
 */
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchedulerClient } from '@diffmesh/client';
import { silentLogger } from '@diffmesh/core';
import { startTestMesh, type TestMesh } from './harness.js';

let t: TestMesh;
let client: SchedulerClient;
beforeAll(async () => {
  t = await startTestMesh({ gateway: { apiKeys: [] } });
  client = new SchedulerClient({ addresses: [t.mesh.schedulerAddress], log: silentLogger() });
}, 120_000);
afterAll(async () => {
  await client?.close();
  await t?.stop();
});

async function model(name: string) {
  const m = (await client.listModels()).models.find((x) => x.name === name);
  if (!m) throw new Error(`${name} is not listed`);
  return m;
}

const BIN = fileURLToPath(import.meta.resolve('@diffmesh/cli/bin'));

describe('model lists', () => {
  it('mark the served model ready and a registered plan without instances not ready, naming its pools', async () => {
    expect(await model('diffmesh/tiny-shapes')).toMatchObject({ ready: true, unavailablePools: [] });
    const flux = await model('black-forest-labs/FLUX.1-dev');
    expect(flux.ready).toBe(false);
    expect(flux.unavailablePools.length).toBeGreaterThan(0);
    expect(flux.unavailablePools).toEqual(expect.arrayContaining(flux.plan!.stages.map((s) => s.pool)));

    const res = await fetch(`${t.mesh.gatewayUrl}/v1/models`);
    const body = (await res.json()) as { data: Array<{ id: string; ready: boolean; unavailable_pools?: string[] }> };
    expect(body.data.find((m) => m.id === 'diffmesh/tiny-shapes')).toMatchObject({ ready: true });
    expect(body.data.find((m) => m.id === 'black-forest-labs/FLUX.1-dev')).toMatchObject({ ready: false });

    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'models', '--remote', t.mesh.schedulerAddress]);
    expect(stdout).toMatch(/^diffmesh\/tiny-shapes +ready +text-to-image, text-to-video, image-to-video$/m);
    expect(stdout).toMatch(/^black-forest-labs\/FLUX\.1-dev +registered +text-to-image +\(no instance in /m);
  });

  it('generating a model that is not ready names its missing pool (exit 1), not an unreachable scheduler', async () => {
    const flux = await model('black-forest-labs/FLUX.1-dev');
    const r = await promisify(execFile)(
      process.execPath,
      [
        BIN,
        'generate',
        'a cat',
        '--remote',
        t.mesh.schedulerAddress,
        '--model',
        'black-forest-labs/FLUX.1-dev',
        '-o',
        path.join(tmpdir(), `diffmesh-not-ready-${process.pid}.png`),
      ],
      {},
    ).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).not.toMatch(/cannot reach/);
    expect(r.stderr).toMatch(new RegExp(`pool "(${flux.unavailablePools.join('|')})" \\(stage \\w+\\) has no healthy instance`));
  });

  it('stop listing a model as ready when the last instance of one of its pools goes away', async () => {
    const tiny = await model('diffmesh/tiny-shapes');
    const vaePool = tiny.plan!.stages.find((s) => s.name === 'STAGE_NAME_VAE_DECODING')!.pool;
    // The VAE decoder's process (tiny-shapes also has a vae-svc for its image_encoding pool).
    const vae = t.mesh.supervisor.processes.find((p) => p.child.spawnargs.includes(vaePool))!;
    vae.child.kill('SIGKILL');
    const deadline = Date.now() + 20_000;
    let now = tiny;
    while (now.ready && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      now = await model('diffmesh/tiny-shapes');
    }
    expect(now).toMatchObject({ ready: false, unavailablePools: [vaePool] });
  });
});
