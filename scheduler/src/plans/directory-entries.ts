import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, DiffmeshError } from '@diffmesh/core';
import { directoryPlan, readDiffusersLayout } from '@diffmesh/model-layout';

/**
 * Fills in the plan entries that name a model directory (`directory: PATH`), from the
 * directory's JSON files (the scheduler never loads a model): the model id (the directory's
 * absolute real path unless the entry gives `model`), modalities, stages with their pools
 * (`encoder-<slug>`, `encoder2-<slug>`, `dit-<slug>`, `vae-<slug>`), defaults and constraints,
 * as `directoryPlan` derives them. Fields the entry gives win (defaults and constraints field
 * by field). `extra` directories (the scheduler's `--model-directories`, the CLI's `--model
 * DIR`) are added as entries unless one already names the same directory. A relative
 * `directory` is taken from `baseDir` (the plans file's folder). Throws ConfigError naming the
 * entry and the file a directory lacks.
 */
export async function expandDirectoryEntries(
  entries: readonly unknown[],
  source: string,
  opts: { baseDir?: string; extra?: readonly string[] } = {},
): Promise<unknown[]> {
  const out: unknown[] = [];
  const seen = new Set<string>();
  const all: { raw: unknown; label: string; fromFile: boolean }[] = [
    ...entries.map((raw, i) => ({ raw, label: `plans[${i}]`, fromFile: true })),
    ...(opts.extra ?? []).map((d, i) => ({ raw: { directory: d }, label: `directories[${i}]`, fromFile: false })),
  ];
  for (const { raw, label, fromFile } of all) {
    if (typeof raw !== 'object' || raw === null || typeof (raw as Record<string, unknown>).directory !== 'string') {
      out.push(raw);
      continue;
    }
    const r = raw as Record<string, unknown>;
    const given = r.directory as string;
    const dir = path.resolve(fromFile && opts.baseDir ? opts.baseDir : process.cwd(), given);
    const real = await realpath(dir).catch(() => dir);
    if (!fromFile && seen.has(real)) continue;
    seen.add(real);
    let layout;
    try {
      layout = await readDiffusersLayout(real);
    } catch (err) {
      const message = err instanceof DiffmeshError ? err.message : String(err);
      throw new ConfigError([{ path: `${label}.directory`, source, message }]);
    }
    const plan = directoryPlan(layout);
    const stages = plan.stages.map((s) => ({ name: s.name, pool: s.pool, ...(s.requires ? { requires: s.requires } : {}) }));
    out.push({
      ...r,
      model: typeof r.model === 'string' ? r.model : layout.dir,
      directory: layout.dir,
      description:
        typeof r.description === 'string' ? r.description : `${layout.pipelineClass || layout.kind} (diffusers/optimum ONNX directory)`,
      // Stages the entry gives decide whether it takes an image (a stage with `requires`).
      modalities:
        r.modalities ??
        (Array.isArray(r.stages) && !r.stages.some((st) => (st as { requires?: unknown } | null)?.requires !== undefined)
          ? plan.modalities.filter((m) => m !== 'image-to-image')
          : plan.modalities),
      stages: r.stages ?? stages,
      defaults: { ...plan.defaults, ...(r.defaults as object | undefined) },
      constraints: { ...plan.constraints, ...(r.constraints as object | undefined) },
    });
  }
  return out;
}
