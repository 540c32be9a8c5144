import { natsRolePermissions, type NatsRole } from '@diffmesh/cli';
import { helmTemplate, parseManifests, type K8sObject } from '@diffmesh/operator';
import { natsAuthorizationConfig } from '@diffmesh/testing';

/** Stand-in public keys of the four roles (values `nats.auth.roles`), one per role. */
export const NATS_ROLE_KEYS = {
  scheduler: `U${'A'.repeat(55)}`,
  tensorSvc: `U${'B'.repeat(55)}`,
  gateway: `U${'C'.repeat(55)}`,
  stage: `U${'D'.repeat(55)}`,
} as const;

const ROLE_OF: Record<keyof typeof NATS_ROLE_KEYS, NatsRole> = {
  scheduler: 'scheduler',
  tensorSvc: 'tensor-svc',
  gateway: 'gateway',
  stage: 'stage',
};

/**
 * The chart's per-role NATS users against `diffmesh up`'s: rendered with `nats.auth.roles`,
 * the bundled server's config must give each role's key exactly the permissions
 * `natsRolePermissions` gives it (so the chart and the CLI cannot drift apart), and each
 * component must mount its own role's seed.
 */
export async function natsPermissionProblems(chartDir: string, helm: string): Promise<{ problems: string[]; passed: string[] }> {
  const values = { nats: { auth: { existingSecret: 'diffmesh-nats', roles: NATS_ROLE_KEYS } } };
  let objs: K8sObject[];
  try {
    objs = parseManifests(await helmTemplate({ chartDir, releaseName: 'check', namespace: 'diffmesh', values, helm }));
  } catch (e) {
    return { problems: [`helm template (per-role NATS nkeys): ${(e as Error).message}`], passed: [] };
  }
  const problems: string[] = [];
  const conf = String((objs.find((o) => o.kind === 'ConfigMap' && o.metadata.name.endsWith('-nats')) as any)?.data?.['nats.conf'] ?? '');
  for (const [field, key] of Object.entries(NATS_ROLE_KEYS) as Array<[keyof typeof NATS_ROLE_KEYS, string]>) {
    const role = ROLE_OF[field];
    const line = natsAuthorizationConfig([key], { [key]: natsRolePermissions(role, key) })
      .split('\n')[2]
      .trim();
    if (!conf.split('\n').some((l) => l.trim() === line))
      problems.push(`nats.conf: the ${role} user's permissions differ from diffmesh up's (expected ${line})`);
  }
  for (const o of objs.filter((x) => ['Deployment', 'DaemonSet', 'StatefulSet'].includes(x.kind))) {
    const vol = ((o as any).spec?.template?.spec?.volumes ?? []).find((v: any) => v.name === 'nats-credentials');
    if (!vol) continue;
    const tier = o.metadata.labels?.['diffmesh.io/tier'];
    const name = o.metadata.name;
    const role =
      tier === 'stage' ? 'stage' : name.endsWith('-scheduler') ? 'scheduler' : name.endsWith('-tensor') ? 'tensor-svc' : 'gateway';
    const key = vol.secret?.items?.[0]?.key;
    if (key !== `${role}.seed`) problems.push(`${o.kind} ${name}: mounts NATS seed ${key}, not ${role}.seed`);
  }
  return {
    problems,
    passed: problems.length
      ? []
      : ["per-role NATS nkeys: each role's permissions as diffmesh up gives them, each component with its own seed"],
  };
}
