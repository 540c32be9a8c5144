/**
 * Tenants: who a caller is, configured in one place. A tenants file (YAML or JSON, e.g. a
 * mounted Kubernetes Secret) lists each tenant with the credentials that identify it (API
 * keys, or mTLS client certificate identities), its fair-share weight, its limits and
 * whether it is an admin. The gateway and the scheduler read the same file and reload it
 * when it changes; a file that no longer parses keeps the last good one (and says so).
 *
 * Without a tenants file tenancy is off: every caller is the tenant `default`, with admin
 * rights (the embedded mode and a single-team mesh).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, unwatchFile, watchFile, type Stats } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { Code, DiffmeshError } from '../errors/errors.js';
import type { Logger } from '../logging/logger.js';
import { certificateIdentity } from '../grpc/peer-identity.js';

/** The tenant of every caller when tenancy is off. */
export const DEFAULT_TENANT = 'default';

const TENANT_NAME = /^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$/;
const KEY_HASH = /^sha256:[0-9a-f]{64}$/;

const LimitsSchema = z
  .object({
    concurrentCost: z.number().positive().optional().describe('cost of its tasks running at once, at most'),
    queuedCost: z.number().positive().optional().describe('cost of its tasks waiting, at most'),
    requestsPerMinute: z.number().positive().optional().describe('requests admitted per minute, at most'),
  })
  .strict();

const TenantSchema = z
  .object({
    name: z.string().regex(TENANT_NAME, 'a tenant name is 1–63 characters of a-z, 0-9, "_", "." and "-"'),
    apiKeys: z.array(z.string().min(16, 'an API key has at least 16 characters')).default([]).describe('bearer API keys, in clear'),
    apiKeyHashes: z
      .array(z.string().regex(KEY_HASH, 'an API key hash is "sha256:" and 64 hex digits'))
      .default([])
      .describe('bearer API keys as `sha256:<hex>` of the key, so the file holds no key'),
    identities: z.array(z.string().min(1)).default([]).describe('mTLS client certificate identities (URI SAN or CN)'),
    admin: z.boolean().default(false).describe('sees and acts on every tenant’s requests'),
    weight: z.number().positive().default(1).describe('fair-share weight against the other tenants'),
    limits: LimitsSchema.default({}),
  })
  .strict();

const TenantsFileSchema = z
  .object({
    tenants: z.array(TenantSchema).min(1, 'list at least one tenant'),
  })
  .strict();

/** A tenant's limits; an absent limit is no limit. */
export type TenantLimits = z.output<typeof LimitsSchema>;

/** One tenant, as the services use it (no credentials). */
export interface Tenant {
  name: string;
  admin: boolean;
  weight: number;
  limits: TenantLimits;
}

/** The tenant of every caller when tenancy is off. */
export const OPEN_TENANT: Tenant = Object.freeze({ name: DEFAULT_TENANT, admin: true, weight: 1, limits: {} });

/** `sha256:<hex>` of an API key: what `apiKeyHashes` lists. */
export function apiKeyHash(key: string): string {
  return `sha256:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}

/**
 * The tenants of a mesh and the credentials that name them. Lookups by API key hash the key
 * and compare hashes in constant time, so neither the key nor its position leaks through
 * timing.
 */
export class TenantDirectory {
  private byName = new Map<string, Tenant>();
  private keyHashes: Array<{ hash: Buffer; tenant: Tenant }> = [];
  private byIdentity = new Map<string, Tenant>();
  private file: string | undefined;
  private listeners = new Set<(dir: TenantDirectory) => void>();

  private constructor(readonly enabled: boolean) {}

  /** Tenancy off: everyone is {@link OPEN_TENANT}. */
  static open(): TenantDirectory {
    return new TenantDirectory(false);
  }

  /** From the parsed contents of a tenants file; throws a message naming the bad field. */
  static fromConfig(raw: unknown, source = 'tenants'): TenantDirectory {
    const dir = new TenantDirectory(true);
    dir.replace(parseTenants(raw, source));
    return dir;
  }

  /** Reads a tenants file (YAML or JSON); throws a message naming the file and the bad field. */
  static load(file: string): TenantDirectory {
    const dir = new TenantDirectory(true);
    dir.replace(readTenantsFile(file));
    dir.file = file;
    return dir;
  }

  /** From a tenants file when one is given, else tenancy off. */
  static fromFile(file: string | undefined): TenantDirectory {
    return file ? TenantDirectory.load(file) : TenantDirectory.open();
  }

  /** All tenants (none when tenancy is off). */
  tenants(): Tenant[] {
    return [...this.byName.values()];
  }

  /** A tenant by name; with tenancy off, {@link OPEN_TENANT} for `default`. */
  get(name: string): Tenant | undefined {
    if (!this.enabled) return name === DEFAULT_TENANT ? OPEN_TENANT : undefined;
    return this.byName.get(name);
  }

  /** The tenant whose API key this is. */
  byApiKey(key: string): Tenant | undefined {
    if (!this.enabled) return OPEN_TENANT;
    const hash = createHash('sha256').update(key, 'utf8').digest();
    let found: Tenant | undefined;
    for (const entry of this.keyHashes) if (timingSafeEqual(entry.hash, hash)) found = entry.tenant;
    return found;
  }

  /** The tenant of an mTLS client certificate identity. */
  byCertIdentity(identity: string): Tenant | undefined {
    if (!this.enabled) return OPEN_TENANT;
    return this.byIdentity.get(identity);
  }

  /**
   * The caller's tenant from its credentials: a bearer API key when it sends one, else its
   * certificate's identity. Throws UNAUTHENTICATED when tenancy is on and neither names a
   * tenant; the message never repeats the key.
   */
  resolve(credentials: { apiKey?: string; certIdentity?: string }): Tenant {
    if (!this.enabled) return OPEN_TENANT;
    if (credentials.apiKey !== undefined) {
      const t = this.byApiKey(credentials.apiKey);
      if (!t) throw new DiffmeshError(Code.UNAUTHENTICATED, 'UNAUTHENTICATED', 'invalid API key');
      return t;
    }
    const t = credentials.certIdentity !== undefined ? this.byCertIdentity(credentials.certIdentity) : undefined;
    if (t) return t;
    throw new DiffmeshError(
      Code.UNAUTHENTICATED,
      'UNAUTHENTICATED',
      credentials.certIdentity !== undefined
        ? `client certificate "${credentials.certIdentity}" belongs to no tenant`
        : 'missing credentials: send an API key as "authorization: Bearer <key>" metadata',
    );
  }

  /** Whether `tenant` may see and act on a request of `owner`. */
  static mayAccess(tenant: Tenant, owner: string | undefined): boolean {
    return tenant.admin || (owner ?? DEFAULT_TENANT) === tenant.name;
  }

  /** Calls `listener` after each reload. */
  onReload(listener: (dir: TenantDirectory) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Rereads the file when it changes (polled every `intervalMs`, which works for mounted
   * Secrets whose files are swapped by symlink). A file that no longer parses is logged and
   * the tenants stay as they were. Returns the function that stops watching.
   */
  watch(log: Logger, intervalMs = 2000): () => void {
    const file = this.file;
    if (!file) return () => undefined;
    const onChange = (cur: Stats, prev: Stats): void => {
      if (cur.mtimeMs === prev.mtimeMs && cur.size === prev.size && cur.ino === prev.ino) return;
      try {
        this.replace(readTenantsFile(file));
        log.info({ file, tenants: this.byName.size }, 'tenants reloaded');
        for (const l of this.listeners) l(this);
      } catch (err) {
        log.error({ file, err: (err as Error).message }, 'tenants file not reloaded: it is invalid; the last good one stays');
      }
    };
    watchFile(file, { interval: intervalMs, persistent: false }, onChange);
    return () => unwatchFile(file, onChange);
  }

  private replace(parsed: z.output<typeof TenantsFileSchema>): void {
    const byName = new Map<string, Tenant>();
    const keyHashes: Array<{ hash: Buffer; tenant: Tenant }> = [];
    const byIdentity = new Map<string, Tenant>();
    for (const t of parsed.tenants) {
      const tenant: Tenant = Object.freeze({ name: t.name, admin: t.admin, weight: t.weight, limits: Object.freeze({ ...t.limits }) });
      byName.set(t.name, tenant);
      for (const h of [...t.apiKeys.map(apiKeyHash), ...t.apiKeyHashes]) keyHashes.push({ hash: Buffer.from(h.slice(7), 'hex'), tenant });
      for (const id of t.identities) byIdentity.set(id, tenant);
    }
    this.byName = byName;
    this.keyHashes = keyHashes;
    this.byIdentity = byIdentity;
  }
}

function readTenantsFile(file: string): z.output<typeof TenantsFileSchema> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`tenants file ${file}: cannot read it: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new Error(`tenants file ${file}: not YAML or JSON: ${(err as Error).message.split('\n')[0]}`);
  }
  return parseTenants(raw, `tenants file ${file}`);
}

function parseTenants(raw: unknown, source: string): z.output<typeof TenantsFileSchema> {
  const res = TenantsFileSchema.safeParse(raw);
  if (!res.success) {
    // Name the field, never the value: the file holds API keys.
    const lines = res.error.issues.map((i) => `${source}: ${i.path.map(String).join('.') || '(file)'}: ${i.message}`);
    throw new Error(lines.join('\n'));
  }
  const seen = new Map<string, string>();
  const problems: string[] = [];
  for (const [i, t] of res.data.tenants.entries()) {
    if (seen.has(`name:${t.name}`)) problems.push(`${source}: tenants.${i}.name: "${t.name}" is listed twice`);
    seen.set(`name:${t.name}`, t.name);
    for (const h of [...t.apiKeys.map(apiKeyHash), ...t.apiKeyHashes]) {
      const other = seen.get(h);
      if (other !== undefined && other !== t.name)
        problems.push(`${source}: tenants.${i}: an API key of "${t.name}" is also a key of "${other}"`);
      seen.set(h, t.name);
    }
    for (const id of t.identities) {
      const other = seen.get(`id:${id}`);
      if (other !== undefined && other !== t.name)
        problems.push(`${source}: tenants.${i}.identities: "${id}" is also an identity of "${other}"`);
      seen.set(`id:${id}`, t.name);
    }
  }
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return res.data;
}

/**
 * The API key a caller sends: the token of `Authorization: Bearer <key>`, else `X-Api-Key`
 * (gRPC metadata and HTTP headers alike).
 */
export function apiKeyOf(authorization: string | undefined, xApiKey: string | undefined): string | undefined {
  const bearer = authorization === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1];
  return bearer ?? (xApiKey || undefined);
}

/** What a gRPC call presents to be recognised: its bearer key and its client certificate. */
export interface CallCredentials {
  apiKey?: string;
  certIdentity?: string;
}

/** The parts of a grpc-js server call that carry credentials. */
interface CallLike {
  metadata: { get(key: string): Array<string | Buffer> };
  getAuthContext?: () => { sslPeerCertificate?: { subject?: { CN?: string | string[] }; subjectaltname?: string } } | undefined;
}

/**
 * A gRPC call's credentials: `authorization: Bearer <key>` metadata (or `x-api-key`), and
 * the verified client certificate's identity (its first `URI:` subject alternative name,
 * else its common name) when the call came over mutual TLS.
 */
export function callCredentials(call: CallLike): CallCredentials {
  const out: CallCredentials = {};
  const text = (key: string): string | undefined => {
    const v = call.metadata.get(key)[0];
    return typeof v === 'string' ? v : undefined;
  };
  const apiKey = apiKeyOf(text('authorization'), text('x-api-key'));
  if (apiKey) out.apiKey = apiKey;
  const cert = call.getAuthContext?.()?.sslPeerCertificate;
  const identity = cert ? certificateIdentity(cert) : undefined;
  if (identity) out.certIdentity = identity;
  return out;
}
