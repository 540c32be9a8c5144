// Surface: model directories in the diffusers/optimum layout gone wrong, through both of
// their loaders: the stage's (`LoadedModelDirectory.open`, every JSON file and every graph's I/O)
// and the scheduler's (`loadPlanRegistry` with `--model-directories`, which derives the plan
// from the JSON files). Each input is a small valid SD directory with one thing broken:
// malformed or mistyped JSON, a truncated or foreign model.onnx, a missing file, component
// names that point outside the directory, a component folder that is a link out of it.
// Each must load or be refused with a ConfigError or DiffmeshError (never a bare TypeError),
// and no name in the directory's files may make the stage read a file outside it.
import { cp, mkdtemp, readFile, rm, symlink, truncate, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { ConfigError, DiffmeshError } from '@diffmesh/core';
import { buildSdDir } from '@diffmesh/models';
import { loadPlanRegistry } from '@diffmesh/scheduler';
import { LoadedModelDirectory } from '@diffmesh/stage-host';
import { forEachInput, hostileJsonValue } from './generators.js';
import type { FuzzReport } from './report.js';

const JSON_FILES = [
  'model_index.json',
  'scheduler/scheduler_config.json',
  'text_encoder/config.json',
  'tokenizer/special_tokens_map.json',
  'tokenizer/tokenizer_config.json',
  'tokenizer/vocab.json',
  'unet/config.json',
  'vae_decoder/config.json',
  'vae_encoder/config.json',
];
const ONNX_FILES = ['text_encoder/model.onnx', 'unet/model.onnx', 'vae_decoder/model.onnx', 'vae_encoder/model.onnx'];
const COMPONENTS = ['text_encoder', 'unet', 'vae_decoder', 'vae_encoder', 'tokenizer', 'scheduler'];

type Mutation =
  | { kind: 'malformed-json'; file: string; cut: number }
  | { kind: 'mistyped-json'; file: string; key: number; value: unknown }
  | { kind: 'truncated-onnx'; file: string; cut: number }
  | { kind: 'foreign-onnx'; file: string; bytes: Uint8Array }
  | { kind: 'missing-file'; file: string }
  | { kind: 'name-outside'; name: string }
  | { kind: 'link-outside'; component: string };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('malformed-json' as const), file: fc.constantFrom(...JSON_FILES), cut: fc.nat() }),
  fc.record({ kind: fc.constant('mistyped-json' as const), file: fc.constantFrom(...JSON_FILES), key: fc.nat(), value: hostileJsonValue }),
  fc.record({ kind: fc.constant('truncated-onnx' as const), file: fc.constantFrom(...ONNX_FILES), cut: fc.nat() }),
  fc.record({ kind: fc.constant('foreign-onnx' as const), file: fc.constantFrom(...ONNX_FILES), bytes: fc.uint8Array({ maxLength: 300 }) }),
  fc.record({ kind: fc.constant('missing-file' as const), file: fc.constantFrom(...JSON_FILES, ...ONNX_FILES) }),
  fc.record({
    kind: fc.constant('name-outside' as const),
    name: fc.constantFrom('../outside', '../../../../etc', '/etc', 'unet/../../outside', '..', '.', 'a\u0000b'),
  }),
  fc.record({ kind: fc.constant('link-outside' as const), component: fc.constantFrom(...COMPONENTS) }),
);

/** Applies `m` to the directory copy `dir`; `outside` is a folder beside it holding a copy of every component. */
async function apply(dir: string, outside: string, m: Mutation): Promise<void> {
  switch (m.kind) {
    case 'malformed-json': {
      const text = await readFile(path.join(dir, m.file), 'utf8');
      await writeFile(path.join(dir, m.file), `${text.slice(0, m.cut % text.length)}${m.cut % 3 === 0 ? '\u0000}' : ''}`);
      return;
    }
    case 'mistyped-json': {
      const json = JSON.parse(await readFile(path.join(dir, m.file), 'utf8')) as Record<string, unknown>;
      const keys = Object.keys(json);
      if (keys.length > 0) json[keys[m.key % keys.length]] = m.value;
      await writeFile(path.join(dir, m.file), JSON.stringify(json));
      return;
    }
    case 'truncated-onnx': {
      const file = path.join(dir, m.file);
      const size = (await readFile(file)).length;
      await truncate(file, m.cut % size);
      return;
    }
    case 'foreign-onnx':
      await writeFile(path.join(dir, m.file), m.bytes);
      return;
    case 'missing-file':
      await unlink(path.join(dir, m.file));
      return;
    case 'name-outside': {
      // A component whose folder name leaves the directory.
      const index = JSON.parse(await readFile(path.join(dir, 'model_index.json'), 'utf8')) as Record<string, unknown>;
      const [first] = Object.entries(index).filter(([, v]) => Array.isArray(v));
      if (first) {
        delete index[first[0]];
        index[m.name] = first[1];
      }
      await writeFile(path.join(dir, 'model_index.json'), JSON.stringify(index));
      return;
    }
    case 'link-outside':
      await rm(path.join(dir, m.component), { recursive: true, force: true });
      await symlink(path.join(outside, m.component), path.join(dir, m.component));
      return;
  }
}

/** How a loader answered: `loaded`, or the kind of error it threw and whether that is a correct refusal. */
function classify(err: unknown): { answer: string; wrong?: string } {
  if (err === undefined) return { answer: 'loaded' };
  if (err instanceof ConfigError) return { answer: 'ConfigError' };
  if (err instanceof DiffmeshError) {
    const name = `DiffmeshError ${err.reason}`;
    return err.reason === 'INTERNAL' ? { answer: name, wrong: `INTERNAL: ${err.message}` } : { answer: name };
  }
  if (err instanceof Error) return { answer: err.name, wrong: `threw ${err.name}: ${err.message}` };
  return { answer: 'thrown', wrong: `threw ${typeof err}` };
}

export async function fuzzModelDirectories(report: FuzzReport): Promise<void> {
  const surface = 'model-directories';
  const root = await mkdtemp(path.join(tmpdir(), 'diffmesh-fuzz-dirs-'));
  try {
    const base = path.join(root, 'base');
    await buildSdDir(base, {});
    // Real components outside every copy: what an escaping name or link would reach.
    const outside = path.join(root, 'outside');
    await cp(base, outside, { recursive: true });
    let n = 0;
    await forEachInput('modelDirectories', mutation, async (m) => {
      const dir = path.join(root, `in-${(n += 1)}`);
      await cp(base, dir, { recursive: true });
      try {
        await apply(dir, outside, m);
        /** Paths of the loaded layout that are not inside the directory (a name that escaped it). */
        let escaped: string[] = [];
        const results = await Promise.all([
          LoadedModelDirectory.open(dir).then(
            (md) => {
              const inside = (p: string) => p.startsWith(md.layout.dir + path.sep);
              const paths = [...Object.values(md.layout.components).map((c) => c.model), ...Object.values(md.layout.tokenizers)];
              escaped = paths.filter((p) => p !== undefined && !inside(p));
              return undefined;
            },
            (err: unknown) => err ?? new Error('undefined'),
          ),
          loadPlanRegistry(undefined, { directories: [dir] }).then(
            () => undefined,
            (err: unknown) => err ?? new Error('undefined'),
          ),
        ]);
        for (const [i, err] of results.entries()) {
          const loader = i === 0 ? 'stage LoadedModelDirectory.open' : 'scheduler loadPlanRegistry';
          const { answer, wrong: bad } = classify(err);
          // One input, read by both loaders: each answer is counted, the input once.
          if (i === 0) report.record(surface, { made: m.kind, target: 'stage and scheduler loaders' }, `stage: ${answer}`);
          else report.answer(surface, `scheduler: ${answer}`);
          const what = `${loader}, ${m.kind} ${'file' in m ? m.file : 'name' in m ? JSON.stringify(m.name) : m.component}`;
          // No name in the directory's files makes a loader read outside it. (A component folder
          // that is a symbolic link is followed, as the Hugging Face cache's snapshots need.)
          const wrong = bad ?? (i === 0 && escaped.length > 0 ? `loaded ${escaped.join(', ')} from outside the directory` : undefined);
          if (wrong) {
            report.fail(surface, `${what}: ${wrong}`);
            throw new Error(`${what}: ${wrong}`);
          }
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
