import { X509Certificate, createPrivateKey, randomBytes, webcrypto } from 'node:crypto';
import { chmod, lstat, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import path from 'node:path';
import { IDENTITY_URI_PREFIX } from '@diffmesh/core';
import { createNkeyUser, natsCredentialsKind, nkeyPublicKey } from '@diffmesh/discovery';

/** TLS files (PEM paths) of one identity: the mesh's CA, its certificate and its key. */
export interface IdentityTls {
  ca: string;
  cert: string;
  key: string;
}

/** The NATS users of a mesh: one per kind of process (each its own nkey seed file). */
export const NATS_ROLES = ['scheduler', 'tensor-svc', 'gateway', 'stage', 'client'] as const;
export type NatsRole = (typeof NATS_ROLES)[number];

/**
 * Identities every mesh has a certificate for (`nats` is the nats-server's); stage pools
 * (`stage:<pool>`) get theirs on demand.
 */
const FIXED_IDENTITIES = ['scheduler', 'tensor-svc', 'gateway', 'client', 'nats'] as const;

/**
 * The security material of a local mesh, kept in one folder (mode 0700): a CA, a leaf
 * certificate per identity (server and client usage, SAN `localhost`, `127.0.0.1`, `::1`, the
 * mesh's hosts and the URI `urn:diffmesh:<identity>`), and an nkey seed per NATS role. Keys
 * and seeds are files of mode 0600; nothing here ever holds their content in a string that
 * is logged or printed.
 */
export interface MeshCredentials {
  /** The folder holding everything. */
  dir: string;
  /** PEM path of the CA certificate every service trusts. */
  ca: string;
  /** The TLS files of `identity` (e.g. `scheduler`, `stage:dit`), made when missing or no longer valid. */
  tls(identity: string): Promise<IdentityTls>;
  /** Path of the nkey seed file of a NATS role. */
  natsSeedFile(role: NatsRole): string;
  /** Public keys of every NATS role: the users the mesh's nats-server admits. */
  natsPublicKeys: string[];
  /** The public key of each NATS role (what `meshNatsPermissions` gives permissions to). */
  natsRoleKeys: Record<NatsRole, string>;
  /** The seed of the `client` role (for the nats-server readiness probe; never print it). */
  natsClientSeed: string;
}

/** Options of {@link ensureMeshCredentials}. */
export interface MeshCredentialsOptions {
  /** Addresses besides loopback the services listen on (added as SANs). */
  hosts?: string[];
  /** Validity of new leaf certificates in days (default 365). */
  leafDays?: number;
  /** Validity of a new CA in days (default 3650). */
  caDays?: number;
}

const DAY_MS = 86_400_000;
/** A certificate that expires within this is made again rather than reused. */
const RENEW_BEFORE_MS = 7 * DAY_MS;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** File-name form of an identity (`stage:dit` → `stage-dit`). */
export function identityFileName(identity: string): string {
  return identity.replace(/[^A-Za-z0-9._-]/g, '-');
}

/**
 * The credentials of the mesh in `dir`: reuses the CA, certificates and seeds already there
 * when they are present and valid (a certificate that does not verify against the CA, lacks a
 * host, or expires within a week is made again; a new CA re-issues every certificate), and
 * makes what is missing. Delete the folder to rotate everything.
 */
export async function ensureMeshCredentials(dir: string, opts: MeshCredentialsOptions = {}): Promise<MeshCredentials> {
  await mkdir(path.join(dir, 'nats'), { recursive: true, mode: 0o700 });
  // In a shared folder (`<tmp>/diffmesh` without XDG_RUNTIME_DIR) another user could have made
  // it first, or put a link there: use only a real folder of our own.
  const info = await lstat(dir);
  if (!info.isDirectory() || (process.getuid && info.uid !== process.getuid())) {
    throw new Error(`${dir} is not a folder owned by this user; remove it or set DIFFMESH_STATE_FILE elsewhere`);
  }
  await chmod(dir, 0o700);
  const hosts = [...new Set(['localhost', '127.0.0.1', '::1', ...(opts.hosts ?? [])].filter((h) => h && !['0.0.0.0', '::'].includes(h)))];
  const ca = await ensureCa(dir, opts.caDays ?? 3650);
  const issued = new Map<string, Promise<IdentityTls>>();
  const tls = (identity: string): Promise<IdentityTls> => {
    let p = issued.get(identity);
    if (!p) {
      p = ensureLeaf(dir, ca, identity, hosts, opts.leafDays ?? 365);
      issued.set(identity, p);
    }
    return p;
  };
  for (const id of FIXED_IDENTITIES) await tls(id);

  const seedFile = (role: NatsRole): string => path.join(dir, 'nats', `${role}.nk`);
  const publicKeys: string[] = [];
  const roleKeys = {} as Record<NatsRole, string>;
  let clientSeed = '';
  for (const role of NATS_ROLES) {
    const file = seedFile(role);
    let seed = await readFile(file, 'utf8').then(
      (t) => t.trim(),
      () => '',
    );
    if (natsCredentialsKind(seed) !== 'nkey') {
      seed = createNkeyUser().seed;
      await writeSecret(file, `${seed}\n`);
    } else {
      await chmod(file, 0o600);
    }
    publicKeys.push(nkeyPublicKey(seed));
    roleKeys[role] = nkeyPublicKey(seed);
    if (role === 'client') clientSeed = seed;
  }
  return {
    dir,
    ca: ca.certFile,
    tls,
    natsSeedFile: seedFile,
    natsPublicKeys: publicKeys,
    natsRoleKeys: roleKeys,
    natsClientSeed: clientSeed,
  };
}

interface Ca {
  certFile: string;
  cert: X509Certificate;
  /** The CA's signing key, in memory only while this process issues certificates. */
  key: webcrypto.CryptoKey;
}

async function ensureCa(dir: string, days: number): Promise<Ca> {
  const certFile = path.join(dir, 'ca.pem');
  const keyFile = path.join(dir, 'ca-key.pem');
  const existing = await readPair(certFile, keyFile);
  if (existing && fresh(existing.cert) && existing.cert.ca) {
    return { certFile, cert: existing.cert, key: await importSigningKey(existing.keyPem) };
  }
  const x509 = await x509Module();
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=diffmesh mesh CA ${randomBytes(4).toString('hex')}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + days * DAY_MS),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  await writeSecret(keyFile, await privateKeyPem(keys.privateKey));
  await writePublic(certFile, cert.toString('pem'));
  return { certFile, cert: new X509Certificate(cert.toString('pem')), key: keys.privateKey };
}

async function ensureLeaf(dir: string, ca: Ca, identity: string, hosts: string[], days: number): Promise<IdentityTls> {
  const base = identityFileName(identity);
  const certFile = path.join(dir, `${base}.pem`);
  const keyFile = path.join(dir, `${base}-key.pem`);
  const uri = `${IDENTITY_URI_PREFIX}${identity}`;
  const existing = await readPair(certFile, keyFile);
  if (
    existing &&
    fresh(existing.cert) &&
    existing.cert.checkIssued(ca.cert) &&
    existing.cert.verify(ca.cert.publicKey) &&
    hostsCovered(existing.cert, hosts, uri)
  ) {
    return { ca: ca.certFile, cert: certFile, key: keyFile };
  }
  const x509 = await x509Module();
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${identity.replace(/[,+="\\<>;#]/g, '_')}`,
    issuer: new x509.X509Certificate(ca.cert.raw).subject,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(Math.min(now + days * DAY_MS, Date.parse(ca.cert.validTo))),
    signingKey: ca.key,
    publicKey: keys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...hosts.map((h) => (isIP(h) ? { type: 'ip' as const, value: h } : { type: 'dns' as const, value: h })),
        { type: 'url', value: uri },
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(await x509PublicKeyOf(ca.cert)),
    ],
  });
  await writeSecret(keyFile, await privateKeyPem(keys.privateKey));
  await writePublic(certFile, cert.toString('pem'));
  return { ca: ca.certFile, cert: certFile, key: keyFile };
}

/** @peculiar/x509, loaded only when a certificate is made (it needs the Reflect metadata polyfill). */
async function x509Module(): Promise<typeof import('@peculiar/x509')> {
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
  return x509;
}

async function x509PublicKeyOf(cert: X509Certificate): Promise<webcrypto.CryptoKey> {
  const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
  return webcrypto.subtle.importKey('spki', spki, ALG, true, ['verify']);
}

async function importSigningKey(pem: string): Promise<webcrypto.CryptoKey> {
  const der = createPrivateKey(pem).export({ type: 'pkcs8', format: 'der' });
  return webcrypto.subtle.importKey('pkcs8', der, ALG, false, ['sign']);
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' }).toString();
}

/** A certificate and its key when both files exist, parse, and belong together. */
async function readPair(certFile: string, keyFile: string): Promise<{ cert: X509Certificate; keyPem: string } | undefined> {
  try {
    const [certPem, keyPem] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
    const cert = new X509Certificate(certPem);
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) return undefined;
    await chmod(keyFile, 0o600); // reused: readable by the owner only, whatever happened to it since
    return { cert, keyPem };
  } catch {
    return undefined;
  }
}

function fresh(cert: X509Certificate): boolean {
  const now = Date.now();
  return Date.parse(cert.validFrom) <= now && Date.parse(cert.validTo) > now + RENEW_BEFORE_MS;
}

function hostsCovered(cert: X509Certificate, hosts: string[], uri: string): boolean {
  const sans = new Set((cert.subjectAltName ?? '').split(/,\s*/));
  const ip = (h: string): string => (h === '::1' ? '0:0:0:0:0:0:0:1' : h);
  return (
    sans.has(`URI:${uri}`) &&
    hosts.every((h) => (isIP(h) ? sans.has(`IP Address:${ip(h)}`) || sans.has(`IP Address:${h}`) : sans.has(`DNS:${h}`)))
  );
}

function serial(): string {
  // Positive, 16 random bytes: distinct serials for every certificate the CA issues.
  const b = randomBytes(16);
  b[0] &= 0x7f;
  return b.toString('hex');
}

/** Writes a key or seed: mode 0600 from its first byte, then moved into place. */
async function writeSecret(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, file);
}

async function writePublic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, file);
}
