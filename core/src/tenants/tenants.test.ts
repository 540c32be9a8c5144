import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Code, DiffmeshError } from '../errors/errors.js';
import { silentLogger } from '../logging/logger.js';
import { apiKeyHash, callCredentials, OPEN_TENANT, TenantDirectory } from './tenants.js';

const KEY_A = 'key-of-acme-0123456789';
const KEY_B = 'key-of-globex-0123456789';

function file(contents: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'tenants-'));
  const f = path.join(dir, 'tenants.yaml');
  writeFileSync(f, contents);
  return f;
}

const YAML = `
tenants:
  - name: acme
    apiKeys: [${KEY_A}]
    identities: [client:acme]
    weight: 2
    limits: { concurrentCost: 1000000, requestsPerMinute: 60 }
  - name: globex
    apiKeyHashes: ["${apiKeyHash(KEY_B)}"]
  - name: ops
    admin: true
    identities: [spiffe://mesh/ops]
`;

function metadata(entries: Record<string, string>): { get(key: string): string[] } {
  return { get: (key) => (entries[key] === undefined ? [] : [entries[key]]) };
}

describe('TenantDirectory', () => {
  it('maps API keys (clear or hashed) and certificate identities to tenants, with their weight and limits', () => {
    const dir = TenantDirectory.load(file(YAML));
    expect(dir.enabled).toBe(true);
    expect(dir.resolve({ apiKey: KEY_A })).toMatchObject({ name: 'acme', admin: false, weight: 2, limits: { requestsPerMinute: 60 } });
    expect(dir.resolve({ apiKey: KEY_B })).toMatchObject({ name: 'globex', weight: 1, limits: {} });
    expect(dir.resolve({ certIdentity: 'client:acme' }).name).toBe('acme');
    expect(dir.resolve({ certIdentity: 'spiffe://mesh/ops' })).toMatchObject({ name: 'ops', admin: true });
  });

  it('refuses an unknown key or identity with UNAUTHENTICATED, never repeating the key', () => {
    const dir = TenantDirectory.load(file(YAML));
    const wrong = 'not-a-key-of-anyone-at-all';
    for (const creds of [{ apiKey: wrong }, { certIdentity: 'client:nobody' }, {}]) {
      let err: unknown;
      try {
        dir.resolve(creds);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(DiffmeshError);
      expect((err as DiffmeshError).code).toBe(Code.UNAUTHENTICATED);
      expect((err as DiffmeshError).message).not.toContain(wrong);
    }
    // A key wins over a certificate: a wrong key is refused even from a known certificate.
    expect(() => dir.resolve({ apiKey: wrong, certIdentity: 'client:acme' })).toThrow(/invalid API key/);
  });

  it('with tenancy off, everyone is the default tenant with admin rights', () => {
    const dir = TenantDirectory.fromFile(undefined);
    expect(dir.enabled).toBe(false);
    expect(dir.resolve({})).toBe(OPEN_TENANT);
    expect(dir.resolve({ apiKey: 'anything' })).toBe(OPEN_TENANT);
    expect(TenantDirectory.mayAccess(OPEN_TENANT, 'acme')).toBe(true);
  });

  it('lets a tenant access its own requests only, and an admin every one', () => {
    const dir = TenantDirectory.load(file(YAML));
    const acme = dir.get('acme')!;
    expect(TenantDirectory.mayAccess(acme, 'acme')).toBe(true);
    expect(TenantDirectory.mayAccess(acme, 'globex')).toBe(false);
    expect(TenantDirectory.mayAccess(acme, undefined)).toBe(false);
    expect(TenantDirectory.mayAccess(dir.get('ops')!, 'globex')).toBe(true);
  });

  it('names the field of a bad file and never prints a key', () => {
    const cases: Array<[string, RegExp]> = [
      [`tenants:\n  - name: Acme!\n`, /tenants\.0\.name: a tenant name/],
      [`tenants:\n  - name: a\n    apiKeys: [short]\n`, /tenants\.0\.apiKeys\.0: an API key has at least 16/],
      [`tenants:\n  - name: a\n    weight: 0\n`, /tenants\.0\.weight/],
      [`tenants:\n  - name: a\n    limits: { concurrentCost: -1 }\n`, /tenants\.0\.limits\.concurrentCost/],
      [`tenants:\n  - name: a\n    colour: red\n`, /tenants\.0: .*colour/],
      [`tenants:\n  - name: a\n    apiKeys: [${KEY_A}]\n  - name: b\n    apiKeys: [${KEY_A}]\n`, /an API key of "b" is also a key of "a"/],
      [`tenants:\n  - name: a\n  - name: a\n`, /"a" is listed twice/],
      [`tenants: [\n`, /not YAML or JSON/],
    ];
    for (const [text, message] of cases) {
      let msg = '';
      try {
        TenantDirectory.load(file(text));
      } catch (err) {
        msg = (err as Error).message;
      }
      expect(msg).toMatch(message);
      expect(msg).not.toContain(KEY_A);
    }
  });

  it('reloads a changed file without a restart and keeps the last good one when the new one is invalid', async () => {
    const f = file(YAML);
    const dir = TenantDirectory.load(f);
    const reloaded: number[] = [];
    dir.onReload((d) => reloaded.push(d.tenants().length));
    const stop = dir.watch(silentLogger(), 50);
    try {
      // Swapped in by rename, as Kubernetes swaps a Secret's files.
      const next = `${f}.next`;
      writeFileSync(next, `tenants:\n  - name: initech\n    apiKeys: [${KEY_A}]\n`);
      renameSync(next, f);
      await expect.poll(() => dir.byApiKey(KEY_A)?.name, { timeout: 5000 }).toBe('initech');
      expect(dir.get('acme')).toBeUndefined();
      writeFileSync(f, 'tenants: [');
      await new Promise((r) => setTimeout(r, 300));
      expect(dir.byApiKey(KEY_A)?.name).toBe('initech');
      expect(reloaded).toEqual([1]);
    } finally {
      stop();
    }
  });
});

describe('callCredentials', () => {
  it('reads a bearer key, an x-api-key, and a client certificate identity (URI SAN first, else CN)', () => {
    expect(callCredentials({ metadata: metadata({ authorization: `Bearer ${KEY_A}` }) })).toEqual({ apiKey: KEY_A });
    expect(callCredentials({ metadata: metadata({ 'x-api-key': KEY_B }) })).toEqual({ apiKey: KEY_B });
    const uriCert = { subject: { CN: 'client' }, subjectaltname: 'DNS:localhost, URI:spiffe://mesh/ops' };
    expect(callCredentials({ metadata: metadata({}), getAuthContext: () => ({ sslPeerCertificate: uriCert }) })).toEqual({
      certIdentity: 'spiffe://mesh/ops',
    });
    const cnCert = { subject: { CN: 'client:acme' }, subjectaltname: 'DNS:localhost' };
    expect(callCredentials({ metadata: metadata({}), getAuthContext: () => ({ sslPeerCertificate: cnCert }) })).toEqual({
      certIdentity: 'client:acme',
    });
    expect(callCredentials({ metadata: metadata({}), getAuthContext: () => ({}) })).toEqual({});
  });
});
