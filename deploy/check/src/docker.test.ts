// The image's entrypoint and health probe, run here against an in-process gRPC health server.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEPLOY_DIR } from './run.js';

type Entrypoint = {
  COMMANDS: Record<string, { envPrefix?: string }>;
  withDefaults(cmd: unknown, args: string[], env: Record<string, string>, v: { ip: string; host: string }): string[];
  healthTarget(cmd: unknown, args: string[], env: Record<string, string>): unknown;
  podIp(env: Record<string, string>, nets: Record<string, unknown>): string;
};
type Probe = { checkGrpc(address: string, service: string, timeoutMs: number): Promise<string>; parseArgs(argv: string[]): unknown };

let ep: Entrypoint;
let probe: Probe;
let server: grpc.Server;
let health: HealthImplementation;
let address: string;

beforeAll(async () => {
  ep = (await import(path.join(DEPLOY_DIR, 'docker', 'entrypoint.mjs'))) as Entrypoint;
  probe = (await import(path.join(DEPLOY_DIR, 'docker', 'healthcheck.mjs'))) as Probe;
  server = new grpc.Server();
  health = new HealthImplementation({ '': 'SERVING' });
  health.addToServer(server);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  address = `127.0.0.1:${port}`;
});
afterAll(() => server.forceShutdown());

describe('entrypoint.mjs', () => {
  const v = { ip: '10.1.2.3', host: 'pod-a' };

  it('adds container defaults only where nothing sets the value', () => {
    const dit = ep.COMMANDS['dit-svc'];
    expect(ep.withDefaults(dit, ['--pool=dit-tiny'], {}, v)).toEqual([
      '--pool=dit-tiny',
      '--listen',
      '10.1.2.3:7100',
      '--metrics-listen',
      '0.0.0.0:9464',
      '--models-dirs',
      '/models,/app/models/generated',
    ]);
    // A flag, the service's env variable or a config file wins.
    const args = ep.withDefaults(
      dit,
      ['--listen=$(POD_IP):9000'],
      { DIFFMESH_DIT_METRICS_LISTEN: '0.0.0.0:1', DIFFMESH_DIT_MODELS_DIRS: '/m' },
      v,
    );
    expect(args).toEqual(['--listen=10.1.2.3:9000']);
    expect(ep.withDefaults(dit, ['--config', '/etc/dit.yaml'], {}, v)).toEqual(['--config', '/etc/dit.yaml']);
  });

  it('tells the health probe where to look, loopback for a wildcard address', () => {
    expect(ep.healthTarget(ep.COMMANDS.scheduler, ['--listen', '10.1.2.3:7000', '--tls-ca', '/ca'], {})).toEqual({
      grpc: '10.1.2.3:7000',
      tls: { ca: '/ca' },
    });
    expect(ep.healthTarget(ep.COMMANDS['tensor-svc'], ['--listen=0.0.0.0:7070'], {})).toEqual({ grpc: '127.0.0.1:7070' });
    expect(ep.healthTarget(ep.COMMANDS.gateway, [], { DIFFMESH_GATEWAY_ADMIN_LISTEN: '0.0.0.0:9464' })).toEqual({
      http: 'http://127.0.0.1:9464/healthz',
    });
  });

  it('finds the container address: POD_IP, else the first external IPv4', () => {
    expect(ep.podIp({ POD_IP: '10.9.9.9' }, {})).toBe('10.9.9.9');
    expect(
      ep.podIp(
        {},
        {
          lo: [{ family: 'IPv4', internal: true, address: '127.0.0.1' }],
          eth0: [
            { family: 'IPv6', internal: false, address: 'fe80::1' },
            { family: 'IPv4', internal: false, address: '172.18.0.5' },
          ],
        },
      ),
    ).toBe('172.18.0.5');
  });
});

describe('healthcheck.mjs', () => {
  it('reports SERVING, then NOT_SERVING after the service drains', async () => {
    expect(await probe.checkGrpc(address, '', 2000)).toBe('SERVING');
    health.setStatus('', 'NOT_SERVING');
    expect(await probe.checkGrpc(address, '', 2000)).toBe('NOT_SERVING');
    health.setStatus('', 'SERVING');
  });

  it('fails for an address where nothing listens, within its timeout', async () => {
    await expect(probe.checkGrpc('127.0.0.1:1', '', 500)).rejects.toThrow(/127\.0\.0\.1:1/);
  });

  it('refuses bad usage', () => {
    expect(() => probe.parseArgs(['--grpc'])).toThrow(/needs a value/);
    expect(() => probe.parseArgs(['--bogus'])).toThrow(/unknown argument/);
  });
});

describe('entrypoint.mjs security switches and --version', () => {
  type Switches = {
    applyAuthSwitches(env: Record<string, string | undefined>, read?: (f: string) => string): { off: boolean; removed: string[] };
    versionLine(app?: string): string;
  };
  it('reads the gateway keys from their file, and DIFFMESH_AUTH=off drops every credential setting', () => {
    const sw = ep as unknown as Switches;
    const on: Record<string, string | undefined> = { DIFFMESH_GATEWAY_API_KEYS_FILE: '/credentials/api-key' };
    sw.applyAuthSwitches(on, () => 'dm-a\ndm-b\n');
    expect(on).toEqual({ DIFFMESH_GATEWAY_API_KEYS: 'dm-a,dm-b' });
    const off: Record<string, string | undefined> = {
      DIFFMESH_AUTH: 'off',
      DIFFMESH_DIT_TLS_CA: '/ca',
      DIFFMESH_DIT_TLS_REQUIRE_CLIENT_CERT: 'true',
      DIFFMESH_SCHEDULER_NATS_CREDENTIALS: '/s.nk',
      DIFFMESH_GATEWAY_API_KEYS_FILE: '/k',
      DIFFMESH_GATEWAY_TENANTS_FILE: '/t',
    };
    expect(sw.applyAuthSwitches(off).off).toBe(true);
    expect(off).toEqual({ DIFFMESH_AUTH: 'off', DIFFMESH_GATEWAY_TENANTS_FILE: '/t' });
    expect(() => sw.applyAuthSwitches({ DIFFMESH_AUTH: 'maybe' })).toThrow(/on or off/);
  });

  it('answers --version with the repository’s version', () => {
    expect((ep as unknown as Switches).versionLine()).toMatch(/^diffmesh \d+\.\d+\.\d+ \(node \d+/);
  });
});

describe('credentials.mjs', () => {
  type Credentials = {
    parseArgs(argv: string[], env?: Record<string, string>): { dir: string; hosts: string[]; pools: string[]; natsPort: number };
    natsServerConfig(
      nkeys: string[],
      port: number,
      security?: { permissions?: Record<string, unknown>; tls?: { cert: string; key: string; ca: string; verify?: boolean } },
    ): string;
  };
  let c: Credentials;
  beforeAll(async () => {
    c = (await import(path.join(DEPLOY_DIR, 'docker', 'credentials.mjs'))) as Credentials;
  });
  it('takes its folder, hosts and pools from flags or the environment', () => {
    expect(c.parseArgs(['--pools=a,b', '--hosts', 'x'], { DIFFMESH_CREDENTIALS_DIR: '/c' })).toEqual({
      dir: '/c',
      hosts: ['x'],
      pools: ['a', 'b'],
      natsPort: 4222,
    });
    expect(() => c.parseArgs(['--bogus'])).toThrow(/unknown argument/);
  });
  it('writes a nats-server config admitting only the given nkeys, or anyone when auth is off', () => {
    const key = `U${'A'.repeat(55)}`;
    expect(c.natsServerConfig([key], 4222)).toMatch(new RegExp(`port: 4222[\\s\\S]*jetstream[\\s\\S]*nkey: "${key}"`));
    expect(c.natsServerConfig([], 4222)).not.toMatch(/authorization/);
  });
  it("writes the users' permissions and a TLS block that verifies clients", () => {
    const key = `U${'B'.repeat(55)}`;
    const conf = c.natsServerConfig([key], 4222, {
      permissions: {
        [key]: { publish: { allow: ['diffmesh.discovery.>'] }, subscribe: { allow: [`_INBOX.${key}.>`] }, allowResponses: true },
      },
      tls: { cert: '/credentials/nats.pem', key: '/credentials/nats-key.pem', ca: '/credentials/ca.pem', verify: true },
    });
    expect(conf).toMatch(new RegExp(`nkey: "${key}", permissions: \\{ publish: \\{ allow: \\["diffmesh\\.discovery\\.>"\\] \\}`));
    expect(conf).toMatch(/allow_responses: true/);
    expect(conf).toMatch(/tls \{\n {2}cert_file: "\/credentials\/nats.pem"[\s\S]*ca_file: "\/credentials\/ca.pem"\n {2}verify: true/);
  });
});
