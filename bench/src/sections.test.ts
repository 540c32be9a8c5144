// Every bench section, run as a user runs it (`npm run bench -- SECTION`, here with `--smoke`:
// its smallest sizes), so that none rots unnoticed. What is checked holds whatever the machine's
// speed: the run ends with exit 0, prints its table's rows, no figure is NaN, and every ratio
// (`1.23×`) is positive. No timing is asserted; the figures of a smoke run mean nothing.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [MAIN, ...args], { timeout: 600_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
    );
  });
}

/** Lines of a Markdown table whose first cells match `cells`, e.g. `| cpu | fp32`. */
const row = (...cells: string[]): RegExp =>
  new RegExp(`^\\| ${cells.map((c) => c.replace(/[()|.*+?[\]\\]/g, '\\$&')).join('\\s*\\|\\s*')}\\s*\\|`, 'm');
/** A whitespace-aligned row: its label, then numbers. */
const spaced = (label: string, numbers: number): RegExp => new RegExp(`^\\s*${label}(\\s+-?\\d+(\\.\\d+)?%?){${numbers}}`, 'm');

/** What each section's table must show. A section missing here fails the `--list` test below. */
const SECTIONS: Record<string, RegExp[]> = {
  scheduler: ['generate', 'session', 'floor'].flatMap((m) => [spaced(`${m}\\s+1`, 4), spaced(`${m}\\s+8`, 4)]),
  tensor: [
    row('raw TCP, download'),
    row('tensor-svc Put (gRPC)'),
    row('tensor-svc Get (gRPC)'),
    row('same node: Get from shared memory'),
    row('S3: Put + Get, end to end'),
    row('gRPC Get / raw TCP'),
    row('shared-memory Get / gRPC Get'),
  ],
  'cross-node': [/^cross-node: skipped \(.+\)$|^\| tensor-svc Get \(gRPC, into a fresh buffer\) \|\s+\d+ \|\s+\d+ \| \d+\.\d\d× \|$/m],
  queues: ['memory', 'sqlite', 'redis', 'jetstream'].map((b) => spaced(b, 4)),
  'fair-share': [
    spaced('first come, first served\\s+alone', 4),
    spaced('first come, first served\\s+with heavy', 4),
    spaced('weighted fair share\\s+alone', 4),
    spaced('weighted fair share\\s+with heavy', 4),
  ],
  sim: [/^\s+jetstream\s+4\s+\S+\s+[\d.]+\s+[\d.]+\s+[\d.]+%/m],
  preemption: [row('priority', 'off'), row('priority', 'on'), row('deadline', 'off'), row('deadline', 'on')],
  'mesh-vs-embedded': [spaced('generate', 3), spaced('session', 3), spaced('embedded', 3)],
  'long-runs': [row('main thread (--runner-threads 0)'), row('runner thread (--runner-threads 1)')],
  gpu: [
    ...['plain', 'fused', 'int4'].flatMap((g) => ['1', '2'].map((b) => row('cpu', `fp32 ${g} (diffmesh builder)`, b))),
    ...['plain', 'fused', 'int4'].flatMap((g) => [row('embedded', 'cpu', g), row('mesh', 'cpu', g)]),
  ],
  previews: [
    row('synthetic-dit-image 64×64', 'off'),
    row('synthetic-dit-image 64×64', 'every 4'),
    row('synthetic-dit-image 64×64', 'every 1'),
  ],
  'model-dirs': [
    /^sd1-epsilon\s+sd\s+fp32\s+PNDMScheduler\s+2\s+\d+\.\d\d\s+\d+\.\d\d\s*$/m,
    /^flux\s+flux\s+fp32\s+\S+\s+1\s+\d+\.\d\d\s+\d+\.\d\d\s*$/m,
  ],
  'step-cache': [
    /^diffmesh\/tiny-shapes\s+built-in\s+off\s+–\s+\d+\/\d+\s+0%/m,
    /^diffmesh\/tiny-shapes\s+built-in\s+0\.4\s+2\s+\d+\/\d+\s+\d+%/m,
  ],
  adapters: [
    row('1', '0'),
    row('1', '1 distinct'),
    row('1', '4 (stacked on the item)'),
    row('4', '0'),
    row('4', '1 distinct'),
    row('4', '4 distinct'),
  ],
};

describe('npm run bench -- --list', () => {
  it('lists exactly the sections this file runs', async () => {
    const r = await bench(['--list']);
    expect(r.code).toBe(0);
    const names = r.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/)[0]);
    expect(names.sort()).toEqual(Object.keys(SECTIONS).sort());
  });
});

describe('npm run bench -- SECTION --smoke', () => {
  it.each(Object.entries(SECTIONS))(
    '%s runs to its end and prints sane rows',
    async (name, rows) => {
      const r = await bench([name, '--smoke']);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toContain(`== ${name}: `);
      for (const re of rows) expect(r.stdout, `${name}: ${re}`).toMatch(re);
      expect(r.stdout).not.toMatch(/\bNaN\b|\bInfinity\b|undefined/);
      const ratios = [...r.stdout.matchAll(/(-?\d+(?:\.\d+)?)×(?!\d)/g)].map((m) => Number(m[1]));
      for (const x of ratios) expect(x, `${name}: a ratio`).toBeGreaterThan(0);
    },
    600_000,
  );
});
