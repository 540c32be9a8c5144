import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { Option, type Command } from 'commander';
import {
  addAdapterFile,
  listAdapterFiles,
  readAdapterBytes,
  removeAdapterFile,
  summariseAdapter,
  DEFAULT_MAX_ADAPTER_FILE_BYTES,
} from '@diffmesh/adapters';
import { DEFAULT_ADAPTER_SCALE, DiffmeshError, invalidParameter, type AdapterParams } from '@diffmesh/core';

/**
 * LoRA adapters on the command line: `--lora NAME[:SCALE]` (repeatable) on generate/submit,
 * `--lora-dir` for the embedded runtime, and `diffmesh adapters list|add|remove`, which keep
 * the folder a denoising stage serves (`dit-svc --lora-dir`).
 */

/** `$DIFFMESH_LORA_DIR`, else `~/.diffmesh/loras`. */
export function defaultLoraDir(): string {
  return process.env.DIFFMESH_LORA_DIR ?? path.join(homedir(), '.diffmesh', 'loras');
}

/** Commander's collector of a repeatable `--lora`. */
export function collectLora(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** `NAME[:SCALE]` → adapters (scale 1 when left out); errors name `adapters[i].name` / `.scale`. */
export function parseLoras(values: string[] | undefined): AdapterParams[] {
  return (values ?? []).map((v, i) => {
    const at = v.lastIndexOf(':');
    const name = at < 0 ? v : v.slice(0, at);
    if (name === '') throw invalidParameter(`adapters[${i}].name`, `expected NAME[:SCALE], got "${v}"`);
    if (at < 0) return { name, scale: DEFAULT_ADAPTER_SCALE };
    const raw = v.slice(at + 1);
    const scale = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(scale))
      throw invalidParameter(`adapters[${i}].scale`, `expected a number after "${name}:", got "${raw}"`);
    return { name, scale };
  });
}

function dirOption(): Option {
  return new Option('--dir <folder>', 'the adapter folder (a denoising stage serves it with --lora-dir)')
    .env('DIFFMESH_LORA_DIR')
    .default(defaultLoraDir());
}

/** Registers `diffmesh adapters list|add|remove`; `done(code)` receives each command's exit status. */
export function adaptersCommand(program: Command, report: (err: unknown) => number, done: (code: number) => void): void {
  const cmd = program
    .command('adapters')
    .description('LoRA adapters (.safetensors, diffusers/PEFT or kohya) in the folder a denoising stage serves');
  cmd
    .command('list')
    .description('the adapters in the folder: name, size, layout, base models, layers, ranks')
    .addOption(dirOption())
    .option('--json', 'print JSON')
    .action(async (flags: { dir: string; json?: boolean }) => {
      try {
        const rows = [];
        for (const f of await listAdapterFiles(flags.dir)) {
          try {
            rows.push({
              name: f.name,
              sizeBytes: f.sizeBytes,
              ...summariseAdapter(await readAdapterBytes(f, DEFAULT_MAX_ADAPTER_FILE_BYTES), `${f.name}.safetensors`),
            });
          } catch (err) {
            rows.push({ name: f.name, sizeBytes: f.sizeBytes, error: err instanceof Error ? err.message : String(err) });
          }
        }
        if (flags.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
        else if (rows.length === 0) process.stdout.write(`no adapters in ${flags.dir}\n`);
        else
          for (const r of rows) {
            const what =
              'error' in r
                ? `refused: ${r.error}`
                : `${r.format}, for ${r.families.join('/')}, ${r.targets} layers, rank ${r.ranks.join('/')}`;
            process.stdout.write(`${r.name}\t${(r.sizeBytes / 1048576).toFixed(1)} MiB\t${what}\n`);
          }
        done(0);
      } catch (err) {
        done(report(err));
      }
    });
  cmd
    .command('add')
    .description('check a LoRA file and copy it into the folder (under its file name, or --name)')
    .argument('<file>', 'a .safetensors LoRA file')
    .option('--name <name>', 'the name requests give (default: the file name without .safetensors)')
    .addOption(new Option('--max-bytes <n>', 'largest file accepted').default(String(DEFAULT_MAX_ADAPTER_FILE_BYTES)))
    .addOption(dirOption())
    .action(async (file: string, flags: { dir: string; name?: string; maxBytes: string }) => {
      try {
        const name = flags.name ?? path.basename(file).replace(/\.safetensors$/, '');
        await mkdir(flags.dir, { recursive: true });
        const s = await addAdapterFile(flags.dir, file, name, Number(flags.maxBytes));
        process.stdout.write(`added ${name}: ${s.format}, for ${s.families.join('/')}, ${s.targets} layers, rank ${s.ranks.join('/')}\n`);
        done(0);
      } catch (err) {
        done(report(err));
      }
    });
  cmd
    .command('remove')
    .description('remove an adapter from the folder')
    .argument('<name>', 'the adapter')
    .addOption(dirOption())
    .action(async (name: string, flags: { dir: string }) => {
      try {
        if (!(await removeAdapterFile(flags.dir, name)))
          throw new DiffmeshError(5, 'INVALID_PARAMETER', `no adapter named ${name} in ${flags.dir}`, { metadata: { field: 'name' } });
        process.stdout.write(`removed ${name}\n`);
        done(0);
      } catch (err) {
        done(report(err));
      }
    });
}
