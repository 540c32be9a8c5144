import { realpath } from 'node:fs/promises';
import path from 'node:path';
import { invalidParameter } from '@diffmesh/core/client';
import { checkDirectoryGraphs, isDiffusersDirectory, looksLikePath, readDiffusersLayout } from '@diffmesh/model-layout';

/** What `--model` names: a registry model, or a model directory (its real path is the model id). */
export interface ModelArgument {
  /** The model id requests use. */
  id: string;
  /** The directory, for a model directory. */
  directory?: string;
}

/**
 * Reads `--model`: a path (absolute, `./…`, `../…`) or a folder here holding model_index.json is
 * a model directory in the diffusers/optimum ONNX layout, whose id is its absolute real path;
 * anything else is a registry name. A directory is read and checked here (every JSON file and
 * every graph's inputs and outputs, no weights), so a wrong layout fails before any work with
 * FAILED_PRECONDITION / MODEL_LOAD_FAILED naming the file and the input.
 */
export async function modelArgument(model: string): Promise<ModelArgument> {
  if (!looksLikePath(model) && !(await isDiffusersDirectory(model))) return { id: model };
  let dir: string;
  try {
    dir = await realpath(path.resolve(model));
  } catch {
    throw invalidParameter('model', `"${model}" is neither a model name nor a directory`);
  }
  await checkDirectoryGraphs(await readDiffusersLayout(dir));
  return { id: dir, directory: dir };
}
