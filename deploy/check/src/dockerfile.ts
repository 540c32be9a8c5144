import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { validate as lintDockerfile } from 'dockerfile-utils';
import type { Section } from './report.js';

/** One instruction of a Dockerfile: keyword, raw arguments, flags, 1-based line. */
export interface Instruction {
  keyword: string;
  args: string;
  line: number;
}

/** Instructions with continuation lines joined, comments and parser directives dropped. */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    let l = lines[i];
    if (/^\s*(#|$)/.test(l)) continue;
    const start = i + 1;
    while (/\\\s*$/.test(l) && i + 1 < lines.length) {
      i++;
      const next = lines[i];
      if (/^\s*#/.test(next)) continue;
      l = `${l.replace(/\\\s*$/, ' ')}${next}`;
    }
    const m = /^\s*([A-Za-z]+)\s*(.*)$/.exec(l);
    if (m) out.push({ keyword: m[1].toUpperCase(), args: m[2].trim(), line: start });
  }
  return out;
}

/** Patterns of a .dockerignore as matchers of repository-relative paths. */
export function dockerignore(text: string): (p: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const neg = l.startsWith('!');
      const pat = (neg ? l.slice(1) : l).replace(/^\//, '');
      const re = new RegExp(
        `^${pat
          .split('/')
          .map((seg) =>
            seg === '**'
              ? '.*'
              : seg
                  .replace(/[.+^${}()|[\]\\]/g, '\\$&')
                  .replace(/\*/g, '[^/]*')
                  .replace(/\?/g, '[^/]'),
          )
          .join('/')
          .replace(/\.\*\//g, '(?:.*/)?')}(?:/.*)?$`,
      );
      return { neg, re };
    });
  return (p) => {
    let ignored = false;
    for (const r of rules) if (r.re.test(p)) ignored = !r.neg;
    return ignored;
  };
}

/**
 * A Dockerfile checked without a Docker engine: dockerfile-utils' linter (the VS Code Docker
 * extension's), then hadolint-style rules: base images pinned, stages defined before use,
 * every COPY source present in the build context after .dockerignore, apt lists cleaned,
 * exec-form ENTRYPOINT/CMD/HEALTHCHECK, the runtime stages non-root with a HEALTHCHECK, files
 * the image runs present in the repository, and the built-in models built in the image.
 */
export function checkDockerfile(file: string, contextDir: string): Section {
  const rel = path.relative(contextDir, file);
  const section: Section = { name: `Dockerfile ${rel}`, problems: [], notes: [], passed: [] };
  const text = readFileSync(file, 'utf8');
  for (const d of lintDockerfile(text)) {
    section.problems.push(`${rel}:${d.range.start.line + 1}: ${typeof d.message === 'string' ? d.message : d.message.value}`);
  }
  const ignoreFile = path.join(contextDir, '.dockerignore');
  const ignored = existsSync(ignoreFile) ? dockerignore(readFileSync(ignoreFile, 'utf8')) : () => false;
  if (!existsSync(ignoreFile))
    section.problems.push(`no .dockerignore at the context root (the whole repository, node_modules included, would be the context)`);
  else
    for (const must of ['node_modules', 'core/node_modules', 'core/dist', 'models/generated', '.git'])
      if (!ignored(must)) section.problems.push(`.dockerignore: ${must} is not excluded from the context`);
  // BuildKit prefers a Dockerfile-specific ignore file; the classic builder never reads it.
  if (existsSync(`${file}.dockerignore`))
    section.problems.push(`${rel}.dockerignore: the classic builder ignores it, so the two builders would send different contexts`);

  const ins = parseDockerfile(text);
  const args = new Map<string, string>();
  const stages = new Map<string, { user?: string; healthcheck: boolean; entrypoint: boolean; parent?: string }>();
  let current: string | undefined;
  let sawModels = false;
  for (const i of ins) {
    const at = `${rel}:${i.line}`;
    if (i.keyword === 'ARG' && !current) {
      const [k, v] = i.args.split('=');
      args.set(k, (v ?? '').replace(/^"|"$/g, ''));
    }
    if (i.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(i.args);
      if (!m) {
        section.problems.push(`${at}: cannot read FROM ${i.args}`);
        continue;
      }
      const image = m[1].replace(/\$\{?([A-Z_]+)\}?/g, (_x, k: string) => args.get(k) ?? '');
      const name = (m[2] ?? `#${stages.size}`).toLowerCase();
      const parent = stages.get(image.toLowerCase());
      if (!parent) {
        if (!/:[\w][\w.-]*$/.test(image) && !image.includes('@sha256:'))
          section.problems.push(`${at}: base image ${image} is not pinned to a tag`);
        if (image.endsWith(':latest')) section.problems.push(`${at}: base image ${image} uses :latest`);
      }
      stages.set(name, {
        user: parent?.user,
        healthcheck: parent?.healthcheck ?? false,
        entrypoint: parent?.entrypoint ?? false,
        parent: parent ? image.toLowerCase() : undefined,
      });
      current = name;
      continue;
    }
    const stage = current ? stages.get(current) : undefined;
    if (!stage) continue;
    if (i.keyword === 'USER') stage.user = i.args.split(':')[0];
    if (i.keyword === 'HEALTHCHECK') {
      stage.healthcheck = !/^NONE$/i.test(i.args);
      if (stage.healthcheck && !/CMD\s+\[/.test(i.args)) section.problems.push(`${at}: HEALTHCHECK CMD should be in exec (JSON) form`);
    }
    if (i.keyword === 'ENTRYPOINT') stage.entrypoint = true;
    if ((i.keyword === 'ENTRYPOINT' || i.keyword === 'CMD') && !i.args.startsWith('['))
      section.problems.push(`${at}: ${i.keyword} should be in exec (JSON) form so signals reach the process`);
    if (i.keyword === 'ADD' && /https?:\/\//.test(i.args))
      section.problems.push(`${at}: ADD of a URL; download in a RUN with a checksum instead`);
    if (i.keyword === 'RUN') {
      if (/apt-get install/.test(i.args) && !/--no-install-recommends/.test(i.args))
        section.problems.push(`${at}: apt-get install without --no-install-recommends`);
      if (/apt-get (update|install)/.test(i.args) && !/rm -rf \/var\/lib\/apt\/lists/.test(i.args))
        section.problems.push(`${at}: apt lists are not removed in the same RUN`);
      if (/npm run build:models/.test(i.args)) sawModels = true;
      if (/\bsudo\b/.test(i.args)) section.problems.push(`${at}: sudo in RUN`);
    }
    if (i.keyword === 'COPY' || i.keyword === 'ADD') {
      const parts = i.args.split(/\s+/);
      const flags = parts.filter((p) => p.startsWith('--'));
      const rest = parts.filter((p) => !p.startsWith('--'));
      const from = flags
        .find((f) => f.startsWith('--from='))
        ?.slice(7)
        .toLowerCase();
      const sources = rest.slice(0, -1);
      if (from) {
        if (!stages.has(from) && !from.includes(':') && !from.includes('/'))
          section.problems.push(`${at}: COPY --from=${from}: no earlier stage of that name`);
        continue;
      }
      for (const src of sources) {
        const clean = src.replace(/^\.\//, '').replace(/\/$/, '');
        if (clean === '.' || clean === '') continue;
        if (!existsSync(path.join(contextDir, clean)))
          section.problems.push(`${at}: COPY source ${src} does not exist in the build context`);
        else if (ignored(clean)) section.problems.push(`${at}: COPY source ${src} is excluded by the .dockerignore`);
      }
    }
    // Files under /app that the image runs come from the repository: they must exist.
    for (const m of i.args.matchAll(/\/app\/((?:deploy|scheduler|tensor-svc|gateway|cli|models)\/[\w./-]+\.m?js)/g)) {
      if (!existsSync(path.join(contextDir, m[1])))
        section.problems.push(`${at}: the image runs /app/${m[1]}, which is not in the repository`);
    }
  }
  for (const p of missingManifests(ins, contextDir)) section.problems.push(`${rel}: ${p}`);
  if (!sawModels) section.problems.push(`${rel}: the built-in models are not built in the image (npm run build:models)`);
  // Runtime stages: those that run a service (an ENTRYPOINT of their own or inherited); the
  // build, prune and base stages only feed them.
  const runtime = [...stages.entries()].filter(([, s]) => s.entrypoint);
  if (!runtime.length) section.problems.push(`${rel}: no stage has an ENTRYPOINT`);
  for (const [name, s] of runtime) {
    if (!s.user || s.user === 'root' || s.user === '0') section.problems.push(`${rel}: stage ${name} runs as root (no USER, or USER root)`);
    if (!s.healthcheck) section.problems.push(`${rel}: stage ${name} has no HEALTHCHECK`);
  }
  if (!section.problems.length) {
    section.passed.push(
      `${ins.length} instructions, ${stages.size} stages (${runtime.map(([n]) => n).join(', ')}: non-root, with HEALTHCHECK); every COPY source present`,
    );
  }
  return section;
}

/**
 * What keeps the dependency layer cached: every workspace's package.json (and the lockfile)
 * copied on its own before the first `npm ci`, so that a source change does not re-install.
 */
function missingManifests(ins: Instruction[], contextDir: string): string[] {
  const workspaces =
    (JSON.parse(readFileSync(path.join(contextDir, 'package.json'), 'utf8')) as { workspaces?: string[] }).workspaces ?? [];
  const ci = ins.findIndex((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args));
  if (ci < 0) return ['no RUN npm ci'];
  const copied = new Set(
    ins
      .slice(0, ci)
      .filter((i) => i.keyword === 'COPY' && !/--from=/.test(i.args))
      .flatMap((i) => i.args.split(/\s+/).slice(0, -1)),
  );
  if (copied.has('.')) return ['the whole context is copied before npm ci: any change re-installs the dependencies'];
  return ['package.json', 'package-lock.json', ...workspaces.map((w) => `${w}/package.json`)]
    .filter((m) => !copied.has(m))
    .map((m) => `${m} is not copied before npm ci (the install would miss it, or be redone on every change)`);
}
