import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { checkServices, interpolate, lintCompose, securityProblems, type ComposeFile } from './compose.js';
import { loadPending } from './flags.js';
import type { Section } from './report.js';

/** A flag's value in a command (`--flag=v` or `--flag v`), interpolated with an empty environment. */
function flagOf(command: unknown, flag: string): string | undefined {
  const args: string[] = Array.isArray(command) ? command.map((c) => interpolate(String(c))) : [];
  for (const [i, a] of args.entries()) {
    if (a === `--${flag}`) return args[i + 1];
    if (a.startsWith(`--${flag}=`)) return a.slice(flag.length + 3);
  }
  return undefined;
}

const hostOf = (address: string) => address.replace(/^[a-z]+:\/\//, '').split(':')[0];

/**
 * deploy/compose/compose.node.yaml, a further node joining compose.yaml's mesh: what
 * checkServices checks of every file, the mesh's security on every service, and what a
 * second node on the first one's network must get right: service names the first node does
 * not use (one network, one DNS), a node id of its own, stages writing to this node's
 * tensor-svc, NATS of the first node, the network and credentials joined (external), never made.
 */
export function checkComposeNode(deployDir: string): Section {
  const section: Section = { name: 'a further node (deploy/compose/compose.node.yaml)', problems: [], notes: [], passed: [] };
  const dir = path.join(deployDir, 'compose');
  const file = path.join(dir, 'compose.node.yaml');
  const p = section.problems;
  p.push(...lintCompose(file));
  if (!p.length) section.passed.push('Compose Specification schema and dclint rules');
  const node = parse(readFileSync(file, 'utf8'), { merge: true }) as ComposeFile;
  const mesh = parse(readFileSync(path.join(dir, 'compose.yaml'), 'utf8'), { merge: true }) as ComposeFile;
  const before = p.length;
  if (node.name !== undefined) p.push('compose.node.yaml: top-level `name:` (Compose v1, docker-compose 1.29, refuses the file)');
  checkServices(section, node, dir, loadPending(deployDir));

  const meshNodeIds = new Set(Object.values(mesh.services).map((s) => flagOf(s.command, 'node-id')));
  const nodeIds = new Set<string>();
  const tensor = Object.entries(node.services).find(([, s]) => s.command?.[0] === 'tensor-svc');
  const aliases = new Set<string>((tensor?.[1].networks?.default?.aliases ?? []).map((a: string) => interpolate(a)));
  if (!tensor) p.push('compose.node.yaml: no tensor-svc (a node keeps its stages’ outputs in its own)');
  for (const [name, s] of Object.entries(node.services)) {
    if (mesh.services[name])
      p.push(`service ${name}: also a service of compose.yaml (on the shared network the name resolves to both nodes)`);
    if (!String(s.image ?? '').includes('DIFFMESH_IMAGE')) continue;
    p.push(...securityProblems(name, s));
    const id = flagOf(s.command, 'node-id');
    if (!id) p.push(`service ${name}: no --node-id`);
    else if (meshNodeIds.has(id))
      p.push(`service ${name}: node id ${id} is the first node's (its stages would look for objects in their own shared memory)`);
    else nodeIds.add(id);
    const nats = flagOf(s.command, 'nats');
    if (!nats || !mesh.services[hostOf(nats)]) p.push(`service ${name}: --nats ${nats ?? '(none)'} is not the first node's NATS`);
    const store = flagOf(s.command, 'tensor');
    if (s.command?.[0] !== 'tensor-svc' && (!store || !aliases.has(hostOf(store))))
      p.push(
        `service ${name}: --tensor ${store ?? '(none)'} is not an alias of this node's tensor-svc (${[...aliases].join(', ') || 'none'})`,
      );
  }
  if (nodeIds.size > 1) p.push(`compose.node.yaml: services on one node with different node ids (${[...nodeIds].join(', ')})`);
  if (node.networks?.default?.external !== true) p.push('compose.node.yaml: the default network is not the first node’s (external)');
  for (const [v, def] of Object.entries(node.volumes ?? {}))
    if (def?.external !== true) p.push(`compose.node.yaml: volume ${v} is made here, not the first node's (external)`);
  if (p.length === before)
    section.passed.push(
      `${Object.keys(node.services).length} services: flags, security, node id, names, network and credentials of the first node`,
    );
  section.notes = [...new Set(section.notes)];
  return section;
}
