import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// The gateway as users run it: `node gateway/dist/main.js` in its own process (build first).
const MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

const children: ReturnType<typeof spawn>[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
});

function run(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const line = (prefix: string) =>
    new Promise<string>((resolve, reject) => {
      const check = (): void => {
        const l = stdout.split('\n').find((x) => x.startsWith(prefix));
        if (l) resolve(l.slice(prefix.length).trim());
      };
      child.stdout.on('data', check);
      check(); // it may have been printed already
      void exited.then((code) => reject(new Error(`exited ${code}: ${stderr}`)));
    });
  return { child, exited, line, output: () => ({ stdout, stderr }) };
}

describe('gateway process', () => {
  it('prints its URL, serves, and exits 0 on SIGTERM', async () => {
    const p = run(['--listen', '127.0.0.1:0', '--admin-listen', '127.0.0.1:0', '--schedulers', '127.0.0.1:1', '--log-level', 'warn'], {
      DIFFMESH_GATEWAY_API_KEYS: 'k1,k2',
    });
    const url = await p.line('gateway listening on ');
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const admin = await p.line('gateway admin on ');
    expect((await fetch(`${admin}/healthz`)).status).toBe(200);
    // Keys from the environment; no scheduler runs at 127.0.0.1:1, so the call is a 503.
    expect((await fetch(`${url}/api/v1/models`)).status).toBe(401);
    const res = await fetch(`${url}/api/v1/models`, { headers: { authorization: 'Bearer k2' } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).not.toBeNull();
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  it('refuses a bad configuration naming the field, with exit code 2', async () => {
    const p = run(['--listen', 'nowhere', '--rate-limit-per-minute', '-1']);
    expect(await p.exited).toBe(2);
    const { stderr } = p.output();
    expect(stderr).toMatch(/listen .*host:port/);
    expect(stderr).toMatch(/rateLimitPerMinute/);
  });
});
