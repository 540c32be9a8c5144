// The Docker side of the container tests: the engine and base images (made by
// integration-tests/scripts/ensure-docker.sh), the image build, and compose projects of
// deploy/compose/compose.yaml (a node with the whole mesh) or compose.node.yaml (a further
// node joining it) driven through `docker compose` (v2) or `docker-compose` (v1).
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const COMPOSE_FILE = path.join(REPO_ROOT, 'deploy', 'compose', 'compose.yaml');
/** A further node: its own tensor-svc and stages on the first project's network and credentials. */
export const COMPOSE_NODE_FILE = path.join(REPO_ROOT, 'deploy', 'compose', 'compose.node.yaml');

/** What ensure-docker.sh found or made, or why the container tests cannot run here. */
export type DockerEnvironment = { ok: true; baseImage: string; natsImage: string; compose: string[] } | { ok: false; reason: string };

/**
 * Runs ensure-docker.sh (as root it installs docker.io, starts dockerd and makes the base
 * images when missing). Synchronous: the test decides at collection time whether it runs.
 */
export function ensureDocker(): DockerEnvironment {
  if (process.platform !== 'linux') return { ok: false, reason: 'the container tests run on Linux only' };
  const r = spawnSync('bash', [path.join(REPO_ROOT, 'integration-tests', 'scripts', 'ensure-docker.sh')], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0) {
    const why = r.stderr.trim().split('\n').at(-1) || `ensure-docker.sh exited ${r.status ?? r.signal}`;
    return { ok: false, reason: why };
  }
  const vars = Object.fromEntries(
    r.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/=(.*)/s, 2) as [string, string]),
  );
  return { ok: true, baseImage: vars.BASE_IMAGE, natsImage: vars.NATS_IMAGE, compose: vars.COMPOSE.split(' ') };
}

/** Runs a command to its end; rejects with its output when it exits non-zero. */
export function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { cwd: REPO_ROOT, env: opts.env ?? process.env, maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 120_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${err.message}\n${stderr.slice(-4000)}`));
        else resolve(stdout);
      },
    );
  });
}

/**
 * Builds deploy/docker/Dockerfile's default target with the classic builder (BuildKit's
 * frontend image cannot be pulled where no registry is reachable), with only the tiny model.
 */
export async function buildImage(tag: string, baseImage: string): Promise<void> {
  await run(
    'docker',
    [
      'build',
      '-f',
      'deploy/docker/Dockerfile',
      '--target',
      'diffmesh',
      '--build-arg',
      `NODE_IMAGE=${baseImage}`,
      '--build-arg',
      'MODELS=diffmesh/tiny-shapes',
      '-t',
      tag,
      '.',
    ],
    { env: { ...process.env, DOCKER_BUILDKIT: '0' }, timeoutMs: 600_000 },
  );
}

/** A `docker die` event of one of the project's containers. */
export interface DieEvent {
  service: string;
  exitCode: number;
}

/** One compose project of deploy/compose/compose.yaml (or of `file`). */
export class ComposeStack {
  constructor(
    readonly project: string,
    private readonly compose: string[],
    private readonly env: Record<string, string>,
    private readonly file = COMPOSE_FILE,
  ) {}

  /** `docker compose -p <project> -f <file> <args…>`. */
  exec(args: string[], timeoutMs = 180_000): Promise<string> {
    const [cmd, ...pre] = this.compose;
    return run(cmd, [...pre, '-p', this.project, '-f', this.file, ...args], { env: { ...process.env, ...this.env }, timeoutMs });
  }

  /** The address of a service's container on the project's network (the host reaches it). */
  async ip(service: string): Promise<string> {
    const ips = await run('docker', [
      'inspect',
      '-f',
      '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}',
      await this.containerId(service),
    ]);
    const ip = ips.trim().split(' ')[0];
    if (!ip) throw new Error(`${this.project}: ${service} has no address`);
    return ip;
  }

  async containerId(service: string): Promise<string> {
    const id = (await this.exec(['ps', '-q', service])).trim().split('\n')[0];
    if (!id) throw new Error(`${this.project}: no container for ${service}`);
    return id;
  }

  /** Health status and restart count of a service's container. */
  async state(service: string): Promise<{ health: string; restarts: number; running: boolean; readOnly: boolean }> {
    const out = await run('docker', [
      'inspect',
      '-f',
      '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.RestartCount}} {{.State.Running}} {{.HostConfig.ReadonlyRootfs}}',
      await this.containerId(service),
    ]);
    const [health, restarts, running, readOnly] = out.trim().split(' ');
    return { health, restarts: Number(restarts), running: running === 'true', readOnly: readOnly === 'true' };
  }

  /**
   * SIGKILLs the service's container from the host, as the kernel's OOM killer or a crash
   * would: the container's init gets SIGKILL and every process in it dies. (`docker kill`
   * would count as a manual stop, after which the restart policy does not apply.)
   */
  async kill(service: string): Promise<void> {
    const pid = Number((await run('docker', ['inspect', '-f', '{{.State.Pid}}', await this.containerId(service)])).trim());
    if (!pid) throw new Error(`${this.project}: ${service} is not running`);
    process.kill(pid, 'SIGKILL');
  }

  /** What the container's process printed, every run of it (restarts included). */
  async logs(service: string): Promise<string> {
    return run('docker', ['logs', await this.containerId(service)]).catch((e: Error) => e.message);
  }

  /** Reads a file inside a running service container. */
  async readFile(service: string, file: string): Promise<string> {
    return this.exec(['exec', '-T', service, 'cat', file]);
  }

  /** Starts recording the project's containers' `die` events (exit codes) until stopped. */
  watchDeaths(): { stop: () => DieEvent[] } {
    const deaths: DieEvent[] = [];
    const child: ChildProcess = spawn(
      'docker',
      ['events', '--filter', 'event=die', '--filter', `label=com.docker.compose.project=${this.project}`, '--format', '{{json .}}'],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    let buf = '';
    child.stdout?.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        const attrs = (JSON.parse(line) as { Actor: { Attributes: Record<string, string> } }).Actor.Attributes;
        deaths.push({ service: attrs['com.docker.compose.service'], exitCode: Number(attrs.exitCode) });
      }
    });
    return {
      stop: () => {
        child.kill();
        return deaths;
      },
    };
  }
}
