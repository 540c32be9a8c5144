import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { helmBinary } from '@diffmesh/operator';
import { checkChart } from './chart.js';
import { checkCompose, checkGrafana } from './compose.js';
import { checkComposeNode } from './compose-node.js';
import { checkCrd, checkManifests } from './crd.js';
import { checkDockerfile } from './dockerfile.js';
import type { Section } from './report.js';
import { checkStageFields } from './stage-fields.js';

/** deploy/ of this checkout. */
export const DEPLOY_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Every deploy check; `chartDir` can point at a copy (the test breaks one on purpose). */
export async function runChecks(opts: { deployDir?: string; chartDir?: string; helm?: string } = {}): Promise<Section[]> {
  const deployDir = opts.deployDir ?? DEPLOY_DIR;
  const chartDir = opts.chartDir ?? path.join(deployDir, 'helm', 'diffmesh');
  const helm = opts.helm ?? helmBinary();
  const repo = path.join(deployDir, '..');
  const manifests = path.join(deployDir, 'operator', 'manifests');
  return [
    await checkChart(chartDir, deployDir, helm),
    await checkCrd(chartDir, deployDir, helm),
    await checkManifests(
      readdirSync(manifests)
        .filter((f) => f.endsWith('.yaml'))
        .map((f) => path.join(manifests, f)),
      deployDir,
    ),
    checkCompose(deployDir),
    checkComposeNode(deployDir),
    checkGrafana(deployDir),
    checkDockerfile(path.join(deployDir, 'docker', 'Dockerfile'), repo),
    checkStageFields(chartDir),
  ];
}
