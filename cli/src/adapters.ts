import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import {
  addAdapterFile,
  listAdapterFiles,
  readAdapterBytes,
  removeAdapterFile,
  summariseAdapter,
  DEFAULT_MAX_ADAPTER_FILE_BYTES,
} from '@diffmesh/adapters';
import { Code, DiffmeshError } from '@diffmesh/core';
import { EXIT } from './exit-codes.js';
import { parseInteger, reportError } from './flag-values.js';

/**
 * `diffmesh adapters list|add|remove`, which keep the folder of LoRA files a denoising stage
 * serves (`dit-svc --lora-dir`) and `generate --lora` names adapters in.
 */

/** `diffmesh adapters list`: each file with its layout, base models, layers and ranks (or why it is refused). */
export async function runAdaptersList(flags: { dir: string; json?: boolean }): Promise<number> {
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
          'error' in r ? `refused: ${r.error}` : `${r.format}, for ${r.families.join('/')}, ${r.targets} layers, rank ${r.ranks.join('/')}`;
        process.stdout.write(`${r.name}\t${(r.sizeBytes / 1048576).toFixed(1)} MiB\t${what}\n`);
      }
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

/** `diffmesh adapters add FILE`: the file checked, then copied into the folder under its name. */
export async function runAdaptersAdd(file: string, flags: { dir: string; name?: string; maxBytes?: string }): Promise<number> {
  try {
    const name = flags.name ?? path.basename(file).replace(/\.safetensors$/, '');
    const maxBytes = flags.maxBytes === undefined ? DEFAULT_MAX_ADAPTER_FILE_BYTES : parseInteger(flags.maxBytes, 'max_bytes', 1);
    await mkdir(flags.dir, { recursive: true });
    const s = await addAdapterFile(flags.dir, file, name, maxBytes);
    process.stdout.write(`added ${name}: ${s.format}, for ${s.families.join('/')}, ${s.targets} layers, rank ${s.ranks.join('/')}\n`);
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

/** `diffmesh adapters remove NAME`. */
export async function runAdaptersRemove(name: string, flags: { dir: string }): Promise<number> {
  try {
    if (!(await removeAdapterFile(flags.dir, name)))
      throw new DiffmeshError(Code.NOT_FOUND, 'INVALID_PARAMETER', `no adapter named ${name} in ${flags.dir}`, {
        metadata: { field: 'name' },
      });
    process.stdout.write(`removed ${name}\n`);
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}
