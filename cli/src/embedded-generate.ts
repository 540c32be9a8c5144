import { Code, DiffmeshError, type ObjectRef } from '@diffmesh/core';
import { submitWithInputImage } from '@diffmesh/scheduler';
import type { Embedded } from './embedded.js';
import { follow, planOutput, writeResult, type GenerateArgs, type GenerateOutcome } from './generate.js';
import type { Progress } from './progress.js';

/**
 * Runs one generation on an embedded runtime and writes the file. Nothing is written
 * unless the generation completes; the file appears atomically (temp file + rename).
 */
export async function generateEmbedded(
  mesh: Embedded,
  args: GenerateArgs,
  progress: Progress,
  signal: AbortSignal,
): Promise<GenerateOutcome> {
  const started = Date.now();
  const entry = mesh.registry.lookup(args.model); // unknown model → error naming `model`
  if (!mesh.servable.includes(args.model)) {
    throw new DiffmeshError(
      Code.FAILED_PRECONDITION,
      'MODEL_LOAD_FAILED',
      `model: "${args.model}" has a plan but no model files under ${mesh.catalog.roots.join(', ')} ` +
        `(servable here: ${mesh.servable.join(', ')})`,
      { metadata: { field: 'model' } },
    );
  }
  const out = await planOutput(args.output, args.params.numFrames ?? entry.defaults.numFrames, args.ffmpegPath);
  const state = await submitWithInputImage(
    mesh.scheduler,
    {
      model: args.model,
      params: { ...args.params, prompt: args.prompt },
      priority: args.priority,
      ...(args.deadline ? { deadline: args.deadline } : {}),
    },
    args.image,
  );
  const params = state.context.params;
  const reqId = state.context.reqId;
  const onAbort = (): void => {
    mesh.scheduler.cancel(reqId).catch(() => {
      // already gone
    });
  };
  signal.addEventListener('abort', onAbort, { once: true });
  let outputs: Record<string, ObjectRef>;
  try {
    outputs = await follow(mesh.scheduler.watch(reqId), progress, args.previewDir);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  try {
    const file = await writeResult(mesh.store, outputs.pixels, out, params.fps, args.ffmpegPath, signal);
    return { ...file, params, ms: Date.now() - started };
  } finally {
    await mesh.store.deleteRequest(reqId);
  }
}
