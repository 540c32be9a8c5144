import { readFileSync } from 'node:fs';
import path from 'node:path';
import { gatewayConfig } from '@diffmesh/gateway';
import { listEnvVars, listFlags } from '@diffmesh/core';
import { stageServiceConfig } from '@diffmesh/stage-host';
import { schedulerConfig } from '@diffmesh/scheduler';
import { tensorSvcConfig } from '@diffmesh/tensor-svc';

type Definition = Parameters<typeof listFlags>[0];

/** Each entrypoint command's config definition: the flags and env variables it accepts. */
const DEFINITIONS: Record<string, () => Definition> = {
  scheduler: () => schedulerConfig,
  'tensor-svc': () => tensorSvcConfig,
  'encoder-svc': () => stageServiceConfig('encoder-svc', 'DIFFMESH_ENCODER_'),
  'dit-svc': () => stageServiceConfig('dit-svc', 'DIFFMESH_DIT_'),
  'vae-svc': () => stageServiceConfig('vae-svc', 'DIFFMESH_VAE_'),
  gateway: () => gatewayConfig,
};

/**
 * Flags and env variables the deployment files use before the services have them (see
 * deploy/check/pending-flags.json): allowed, and listed in the report so they are reconciled
 * when the service work lands.
 */
export interface Pending {
  [command: string]: { flags: string[]; env: string[] };
}

export function loadPending(deployDir: string): Pending {
  return JSON.parse(readFileSync(path.join(deployDir, 'check', 'pending-flags.json'), 'utf8')) as Pending;
}

/** What {@link checkServiceArgs} found. */
export interface FlagReport {
  problems: string[];
  /** Pending flags/env in use, and pending ones the service now knows (the list can shrink). */
  notes: string[];
}

/**
 * Checks a service container's arguments (`<command> --flag=value …`, as the image's entrypoint
 * takes them) and its DIFFMESH_* environment against the service's own config definition.
 */
export function checkServiceArgs(where: string, args: string[], envNames: string[], pending: Pending): FlagReport {
  const out: FlagReport = { problems: [], notes: [] };
  const [command, ...rest] = args;
  const def = command ? DEFINITIONS[command] : undefined;
  if (!def) return out;
  const d = def();
  const known = new Set(listFlags(d).map((f) => f.flag));
  const knownEnv = new Set(listEnvVars(d).map((e) => e.name));
  const p = pending[command] ?? { flags: [], env: [] };
  for (const f of p.flags) if (known.has(f)) out.notes.push(`${command}: ${f} is now a real flag; remove it from pending-flags.json`);
  for (const e of p.env) if (knownEnv.has(e)) out.notes.push(`${command}: ${e} is now a real variable; remove it from pending-flags.json`);
  for (const a of rest) {
    if (!a.startsWith('--')) continue;
    const flag = a.split('=')[0];
    if (known.has(flag)) continue;
    if (p.flags.includes(flag)) out.notes.push(`${command}: uses pending flag ${flag}`);
    else out.problems.push(`${where}: ${command} has no flag ${flag}`);
  }
  const prefix = d.envPrefix;
  for (const name of envNames) {
    if (!prefix || !name.startsWith(prefix) || knownEnv.has(name)) continue;
    if (p.env.includes(name)) out.notes.push(`${command}: uses pending variable ${name}`);
    else out.problems.push(`${where}: ${command} reads no variable ${name}`);
  }
  return out;
}
