import { createLogger, invalidParameter, type Logger, type LogLevel } from '@diffmesh/core/client';
import type { GenerateFlags } from './commands/shared-options.js';
import { EXIT } from './exit-codes.js';
import { parseInteger, parseParams, parsePreview, reportError } from './flag-values.js';
import { parseDeadline } from './deadline.js';
import type { GenerateArgs, GenerateOutcome } from './generate.js';
import { readInputImage } from './input-image.js';
import { modelArgument, type ModelArgument } from './model-argument.js';
import { createProgress, type Progress } from './progress.js';
import { schedulerTarget } from './scheduler-target.js';
import { defaultLoraDir } from './commands/lora-options.js';

/**
 * `diffmesh generate`: through a running mesh (`--remote`), or on an embedded runtime in this
 * process. Each loads only what it needs: the remote path never loads onnxruntime or the services.
 */
export async function runGenerate(prompt: string, flags: GenerateFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh', level: flags.logLevel as LogLevel });
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once('SIGINT', onSigint);
  try {
    const params = { ...parseParams(flags), ...parsePreview(flags) };
    const threads = parseInteger(flags.threads, 'threads', 0, 256);
    const model = await modelArgument(flags.model);
    const args = await generateArgs(prompt, flags, model, params);
    const progress = createProgress(process.stderr, flags.progress && !flags.json);
    if (flags.remote && flags.loraDir !== undefined) {
      throw invalidParameter('lora_dir', "applies to the embedded runtime; a mesh's denoising stage serves its own (dit-svc --lora-dir)");
    }
    const result = flags.remote
      ? await runRemote(flags.remote, args, progress, controller.signal, log)
      : await runEmbedded(flags, model, threads, args, progress, controller.signal, log);
    printOutcome(result, args.model, flags.json);
    return EXIT.ok;
  } catch (err) {
    return reportError(err, controller.signal.aborted);
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** What to generate, from the flags (the input image read and checked). */
async function generateArgs(
  prompt: string,
  flags: GenerateFlags,
  model: ModelArgument,
  params: GenerateArgs['params'],
): Promise<GenerateArgs> {
  return {
    prompt,
    model: model.id,
    output: flags.output,
    params,
    priority: parseInteger(flags.priority, 'priority', -1_000_000, 1_000_000),
    ...(flags.deadline !== undefined ? { deadline: parseDeadline(flags.deadline) } : {}),
    ffmpegPath: flags.ffmpeg,
    ...(flags.image !== undefined ? { image: await readInputImage(flags.image) } : {}),
    ...(flags.previewDir !== undefined ? { previewDir: flags.previewDir } : {}),
  };
}

async function runRemote(
  remote: string,
  args: GenerateArgs,
  progress: Progress,
  signal: AbortSignal,
  log: Logger,
): Promise<GenerateOutcome> {
  const [target, { generateRemote }] = await Promise.all([schedulerTarget(remote), import('./remote.js')]);
  return generateRemote(target.addresses, args, progress, signal, log, target.tls);
}

/** The whole pipeline in this process: the models, a scheduler and the stages (loaded now, not before). */
async function runEmbedded(
  flags: GenerateFlags,
  model: ModelArgument,
  threads: number,
  args: GenerateArgs,
  progress: Progress,
  signal: AbortSignal,
  log: Logger,
): Promise<GenerateOutcome> {
  const [{ startEmbedded }, { generateEmbedded }, { defaultModelsRoot }, { EXECUTION_PROVIDERS }] = await Promise.all([
    import('./embedded.js'),
    import('./embedded-generate.js'),
    import('@diffmesh/models'),
    import('@diffmesh/stage-host'),
  ]);
  const mesh = await startEmbedded({
    modelRoots: flags.modelsDir ?? [defaultModelsRoot()],
    executionProviders: parseExecutionProviders(flags.executionProviders, EXECUTION_PROVIDERS),
    ...(model.directory ? { modelDirectories: [model.directory] } : {}),
    ...(flags.plans ? { plansFile: flags.plans } : {}),
    intraOpThreads: threads,
    maxBatch: 8,
    // Adapters only when asked for: the LoRA-branched denoiser costs a little on every step.
    ...(args.params.adapters?.length || flags.loraDir !== undefined ? { loraDir: flags.loraDir ?? defaultLoraDir() } : {}),
    log,
  });
  try {
    return await generateEmbedded(mesh, args, progress, signal);
  } finally {
    await mesh.close();
  }
}

function printOutcome(result: GenerateOutcome, model: string, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  if (result.note) process.stderr.write(`note: ${result.note}\n`);
  const what = result.frames > 1 ? `${result.frames} frames, ${result.format}` : result.format;
  const strength = result.params.strength !== undefined ? `, strength ${result.params.strength}` : '';
  process.stdout.write(
    `wrote ${result.path} (${result.width}×${result.height}, ${what}; model ${model}, ` +
      `seed ${result.params.seed}, ${result.params.numInferenceSteps} steps, ` +
      `guidance ${result.params.guidanceScale}${strength}; ${(result.ms / 1000).toFixed(2)} s)\n`,
  );
}

function parseExecutionProviders<P extends string>(raw: string, known: readonly P[]): P[] {
  const list = raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (list.length === 0) throw invalidParameter('execution_providers', 'list at least one, e.g. cpu');
  const unknown = list.find((p) => !(known as readonly string[]).includes(p));
  if (unknown) throw invalidParameter('execution_providers', `unknown provider "${unknown}" (known: ${known.join(', ')})`);
  return list as P[];
}
