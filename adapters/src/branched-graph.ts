import { link, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findGraphLinears } from './graph-targets.js';
import { addLoraBranches } from './lora-pass.js';
import { decodeModel, encodeModel, externalDataFiles, inlineExternalData } from './onnx-model.js';

/**
 * The graph of ONNX file `file` with a LoRA branch on every linear layer, as a session loads it:
 * the model's bytes, or the path of a rewritten copy. Weights in external data stay in their
 * file: the graph is written to a temporary folder beside hard links to the data (onnxruntime
 * refuses data outside the model's folder, symbolic links included); where the folder is on
 * another file system, weights that fit a protobuf are read into the graph instead.
 * A graph without linear layers is the file itself. `onWritten` hears of a copy written to a folder.
 */
export async function branchedGraphSource(file: string, onWritten?: (copy: string) => void): Promise<string | Uint8Array> {
  const model = decodeModel(await readFile(file));
  const linears = [...findGraphLinears(model).byModule.values()];
  // A graph without linear layers (a T5 exported without names, say) has nothing to branch.
  if (linears.length === 0) return file;
  const external = externalDataFiles(model);
  const { model: rewritten } = addLoraBranches(model, linears);
  if (external.length === 0) return encodeModel(rewritten);
  const dir = await mkdtemp(path.join(tmpdir(), 'diffmesh-lora-graph-'));
  try {
    for (const location of external) await link(path.resolve(path.dirname(file), location), path.join(dir, location));
  } catch {
    await rm(dir, { recursive: true, force: true });
    await inlineExternalData(rewritten, path.dirname(file));
    return encodeModel(rewritten);
  }
  const out = path.join(dir, 'model.onnx');
  await writeFile(out, encodeModel(rewritten));
  onWritten?.(out);
  return out;
}
