import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, CommanderError, Option } from 'commander';
import {
  Code,
  createLogger,
  DEFAULT_PREVIEW_SIDE,
  DiffmeshError,
  invalidParameter,
  MAX_STEPS,
  type GenerationParams,
  type LogLevel,
  type TlsFiles,
} from '@diffmesh/core';
import { defaultModelsRoot } from '@diffmesh/models';
import { isUnreachable } from '@diffmesh/client';
import { startEmbedded } from './embedded.js';
import { generate, type GenerateOutcome } from './generate.js';
import { runStatus, runUp, type UpFlags } from './mesh/commands.js';
import { clientTls, readState } from './mesh/state.js';
import { createProgress } from './progress.js';
import { readInputImage } from './input-image.js';
import { modelArgument } from './model-argument.js';
import { EXECUTION_PROVIDERS, type ExecutionProvider } from '@diffmesh/stage-host';
import { connectScheduler, generateRemote } from './remote.js';
import { cancelRemote, parseReqId, submitRemote, watchRemote } from './requests.js';
import { runGpuAdapter, runGpuCheck, runGpuInstall } from './gpu.js';
import { planPoolsCommand, PlanPoolsUsageError, type PlanPoolsFlags } from './plan-pools.js';
import { parseDeadline } from './deadline.js';

/** Flags whose names differ from the API field they set (for error messages). */
const FLAG_OF_FIELD: Record<string, string> = {
  num_inference_steps: '--steps',
  guidance_scale: '--guidance',
  negative_prompt: '--negative',
  num_frames: '--frames',
  width: '--width',
  height: '--height',
  seed: '--seed',
  fps: '--fps',
  model: '--model',
  output: '--output',
  prompt: 'PROMPT',
  timeout_ms: '--timeout-ms',
  execution_providers: '--execution-providers',
  request_id: '--request-id',
  req_id: 'REQ-ID',
  input_image: '--image',
  strength: '--strength',
  'step_cache.threshold': '--step-cache',
  'step_cache.max_skipped_steps': '--step-cache-max-skip',
  'preview.every_steps': '--preview-every',
};

/** Exit codes: 0 done, 1 failed, 2 bad input, 130 interrupted. */
/**
 * Exit statuses: 0 done; 1 the request failed or was cancelled; 2 bad input (a flag, an
 * unknown model or request id); 3 the mesh could not be reached; 130 interrupted (Ctrl-C).
 */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3, interrupted: 130 } as const;

interface GenerateFlags {
  output?: string;
  model: string;
  seed?: string;
  steps?: string;
  guidance?: string;
  negative?: string;
  width?: string;
  height?: string;
  frames?: string;
  fps?: string;
  image?: string;
  strength?: string;
  stepCache?: string;
  stepCacheMaxSkip?: string;
  priority: string;
  deadline?: string;
  modelsDir: string[];
  plans?: string;
  threads: string;
  executionProviders: string;
  progress: boolean;
  json: boolean;
  ffmpeg: string;
  logLevel: string;
  remote?: string;
  previewDir?: string;
  previewEvery?: string;
}

type GenerationFlags = Pick<
  GenerateFlags,
  | 'model'
  | 'seed'
  | 'steps'
  | 'guidance'
  | 'negative'
  | 'width'
  | 'height'
  | 'frames'
  | 'fps'
  | 'image'
  | 'strength'
  | 'stepCache'
  | 'stepCacheMaxSkip'
  | 'priority'
  | 'deadline'
>;

interface SubmitFlags extends GenerationFlags {
  remote: string;
  requestId?: string;
  timeoutMs?: string;
  json?: boolean;
}

interface WatchFlags {
  output?: string;
  fps?: string;
  remote: string;
  ffmpeg: string;
  logLevel: string;
  progress: boolean;
  json?: boolean;
}

/** Runs the `diffmesh` command with `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = new Command('diffmesh')
    .description('diffmesh: serve diffusion models as a mesh of gRPC services')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });

  let code: number = EXIT.ok;
  withGenerationOptions(
    program
      .command('generate')
      .description(
        'generate an image or video: in this process (embedded runtime, nothing external), or through a running mesh with --remote',
      )
      .argument('<prompt>', 'what to generate, e.g. "a red circle on a blue background"')
      .option('-o, --output <file>', 'output file: .png for an image; .mp4 (ffmpeg), .gif or .apng for a video'),
  )
    .option('--remote <address>', "run through a mesh: the scheduler's gRPC host:port ('local' = the mesh `diffmesh up` started)")
    .option('--preview-dir <dir>', 'write live previews of the picture as it forms (small PNGs, step-NNN.png) into this folder')
    .option('--preview-every <n>', 'with --preview-dir: a preview every this many denoising steps (default 1)')
    .addOption(
      new Option('--models-dir <dir...>', 'folders holding <org>/<name>/model.json')
        .env('DIFFMESH_MODELS_DIR')
        .default([defaultModelsRoot()]),
    )
    .addOption(new Option('--plans <file>', 'ExecutionPlan registry file').env('DIFFMESH_PLANS_FILE'))
    .addOption(
      new Option(
        '--execution-providers <list>',
        'embedded: onnxruntime execution providers in order of preference (cpu, cuda, tensorrt, coreml, dml, webgpu)',
      )
        .env('DIFFMESH_EXECUTION_PROVIDERS')
        .default('cpu'),
    )
    .addOption(new Option('--threads <n>', 'onnxruntime threads per model run (0 = auto)').env('DIFFMESH_THREADS').default('0'))
    .addOption(ffmpegOption())
    .addOption(logLevelOption())
    .option('--no-progress', 'no progress bar')
    .option('--json', 'print the result as JSON on stdout')
    .action(async (prompt: string, flags: GenerateFlags) => {
      code = await runGenerate(prompt, flags);
    });

  withGenerationOptions(
    program
      .command('submit')
      .description('start a request in a running mesh and print its id without waiting (follow it with `watch`)')
      .argument('<prompt>', 'what to generate'),
  )
    .addOption(remoteOption())
    .option('--request-id <id>', 'your own id for the request; submitting it again returns the same request')
    .option('--timeout-ms <ms>', "fail the request if it has not finished after this long (default: the scheduler's)")
    .option('--json', 'print the answer as JSON on stdout')
    .action(async (prompt: string, flags: SubmitFlags) => {
      code = await runSubmit(prompt, flags);
    });

  program
    .command('watch')
    .description(
      'follow a request in a running mesh until it ends (from its first event), optionally writing its result; Ctrl-C stops watching, not the request',
    )
    .argument('<req-id>', 'the request id `submit` printed')
    .option('-o, --output <file>', 'write the result here once the request completes (.png; .mp4, .gif or .apng for a video)')
    .option('--fps <n>', "frames per second of a video file (default: the model's)")
    .addOption(remoteOption())
    .addOption(ffmpegOption())
    .addOption(logLevelOption())
    .option('--no-progress', 'no progress bar')
    .option('--json', 'print the outcome as JSON on stdout')
    .action(async (reqId: string, flags: WatchFlags) => {
      code = await runWatch(reqId, flags);
    });

  program
    .command('cancel')
    .description('cancel a request in a running mesh: its running stage stops and its tensors are deleted')
    .argument('<req-id>', 'the request id')
    .option('--reason <text>', 'recorded in the request and sent to its watchers', 'cancelled from the command line')
    .addOption(remoteOption())
    .action(async (reqId: string, flags: { remote: string; reason: string }) => {
      code = await runCancel(reqId, flags);
    });

  program
    .command('models')
    .description('list the models of a running mesh: which it can serve now, and which are only registered plans')
    .addOption(remoteOption())
    .option('--json', 'print the list as JSON on stdout')
    .action(async (flags: { remote: string; json?: boolean }) => {
      code = await runModels(flags);
    });

  program
    .command('up')
    .description('start a local mesh: nats-server and every service as its own process (Ctrl-C stops it)')
    .option('--nats <url>', 'use this NATS server instead of starting one')
    .option('--models <names>', 'models to serve (comma-separated)', 'diffmesh/tiny-shapes')
    .option('--gateway-listen <host:port>', 'HTTP address of the gateway', '127.0.0.1:8080')
    .option('--no-gateway', 'do not start the HTTP gateway')
    .addOption(
      new Option('--models-dir <dir...>', 'folders holding <org>/<name>/model.json')
        .env('DIFFMESH_MODELS_DIR')
        .default([defaultModelsRoot()]),
    )
    .addOption(new Option('--threads <n>', 'onnxruntime threads per service').env('DIFFMESH_THREADS').default('1'))
    .addOption(
      new Option(
        '--execution-providers <spec>',
        'onnxruntime execution providers of the stage pools, in order of preference: a list for all (webgpu,cpu), or TARGET=LIST;… by pool or service (dit=webgpu,cpu;vae=webgpu,cpu)',
      ).env('DIFFMESH_EXECUTION_PROVIDERS'),
    )
    .addOption(
      new Option(
        '--tenants <file>',
        'tenants file (YAML/JSON: each tenant with its API keys, certificate identities, weight, limits); requests are scoped to their tenant',
      ).env('DIFFMESH_TENANTS_FILE'),
    )
    .addOption(
      new Option('--queue <backend>', 'where the schedulers keep requests and queues: memory, sqlite, redis or jetstream')
        .env('DIFFMESH_QUEUE')
        .default('sqlite'),
    )
    .addOption(
      new Option('--queue-url <url>', 'redis or NATS server of the queue (default: one started for the mesh)').env('DIFFMESH_QUEUE_URL'),
    )
    .addOption(new Option('--sqlite-path <file>', 'sqlite queue file (default: in the log folder)').env('DIFFMESH_SQLITE_PATH'))
    .option('--replicas <list>', 'processes per service, e.g. scheduler=2,dit=3 (scheduler, encoder, dit, vae, gateway)')
    .addOption(
      new Option(
        '--tensor-backend <backend>',
        "where tensor-svc keeps objects: memory (this node), redis or s3 (tensor-svc's --backend; without --tensor-durable the mesh starts the store)",
      )
        .env('DIFFMESH_TENSOR_BACKEND')
        .default('memory'),
    )
    .addOption(
      new Option(
        '--tensor-durable <uri>',
        "redis://host:port/db or s3://bucket/prefix: the store of backend redis/s3, or the write-through target of memory (tensor-svc's --durable)",
      ).env('DIFFMESH_TENSOR_DURABLE'),
    )
    .addOption(new Option('--s3-endpoint <url>', 'endpoint of an S3-compatible server for s3:// stores').env('DIFFMESH_TENSOR_S3_ENDPOINT'))
    .option(
      '--insecure',
      'run WITHOUT mutual TLS and NATS credentials (by default up makes a CA, certificates and NATS nkeys beside its state file)',
    )
    .addOption(logLevelOption())
    .action(async (flags: UpFlags) => {
      code = await runUp(flags);
    });

  program
    .command('status')
    .description('list the services registered in NATS (name, version, pool, node, load)')
    .option('--nats <url>', 'NATS server (default: the mesh `diffmesh up` started on this machine)')
    .option('--json', 'print JSON')
    .action(async (flags: { nats?: string; json?: boolean }) => {
      code = await runStatus(flags);
    });

  program
    .command('plan-pools')
    .description(
      'propose stage pool sizes from measured stage costs and a target rate or a GPU budget, and compare with the whole pipeline on every GPU',
    )
    .option(
      '--stage <spec>',
      'a stage: name=NAME[,pool=POOL][,fixed-ms=MS][,per-item-ms=MS][,steps=N][,max-batch=N]; task cost = steps × (fixed-ms + per-item-ms × batch) (repeatable)',
      (spec: string, list: string[]) => [...list, spec],
      [] as string[],
    )
    .option('--costs <file>', 'stages from a YAML/JSON file: a list (or { stages: [...] }) of objects with the --stage keys')
    .option('--example <name>', "a built-in scenario: wan-14b (the design's Wan-14B text-to-video on 32 H100s)")
    .option('--rate <n>', 'target rate: requests per minute (12, 12/min, 0.5/s, 600/h)')
    .option('--gpus <n>', 'GPU budget: workers to split between the pools')
    .option('--utilisation <x>', 'highest planned utilisation of a worker, in (0, 1] (queueing headroom)', '0.8')
    .option('--steps <n>', 'denoising steps (sets steps of the "denoising" stage)')
    .option('--whole-batch <n>', 'batch a whole-pipeline worker runs each stage at, capped by its max-batch', '1')
    .option('--json', 'print the plan as JSON')
    .action(async (flags: PlanPoolsFlags) => {
      try {
        await planPoolsCommand(flags, process.stdout);
        code = EXIT.ok;
      } catch (err) {
        if (!(err instanceof PlanPoolsUsageError)) throw err;
        process.stderr.write(`diffmesh: plan-pools: ${err.message} (${err.flag})\n`);
        code = EXIT.usage;
      }
    });

  const gpu = program.command('gpu').description('GPU execution providers: what this machine has, and the opt-in CUDA/TensorRT install');
  gpu
    .command('check')
    .description(
      'list the execution providers onnxruntime-node has here, whether each loads and runs (and runs float16), the files and libraries CUDA/TensorRT lack, and the WebGPU adapter',
    )
    .option('--json', 'print the report as JSON')
    .option('--require <list>', 'exit 1 unless these providers work here, e.g. webgpu or cuda')
    .action(async (flags: { json?: boolean; require?: string }) => {
      code = await runGpuCheck(cliPath(), flags);
    });
  gpu
    .command('install')
    .description(
      "install a GPU provider's files into onnxruntime-node: with its own installer (from NuGet; needs network access), or from --from; files of another onnxruntime release are refused",
    )
    .argument('<provider>', "cuda or tensorrt (both in onnxruntime's Linux GPU build, for CUDA 13)")
    .option(
      '--from <path>',
      "the files, of onnxruntime-node's release: onnxruntime's onnxruntime-linux-x64-gpu-<version>.tgz, an npm package of them (tarball or folder), a .nupkg, or a folder holding them",
    )
    .action(async (provider: string, flags: { from?: string }) => {
      code = await runGpuInstall(provider, flags);
    });
  gpu
    .command('adapter')
    .description('print the WebGPU adapter Dawn finds here: vendor, architecture, shader-f16 (needs the optional package "webgpu")')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      code = await runGpuAdapter(flags);
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    throw err;
  }
  return code;
}

async function runGenerate(prompt: string, flags: GenerateFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh', level: flags.logLevel as LogLevel });
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once('SIGINT', onSigint);
  let mesh: Awaited<ReturnType<typeof startEmbedded>> | undefined;
  try {
    const params = { ...parseParams(flags), ...parsePreview(flags) };
    const threads = parseInteger(flags.threads, 'threads', 0, 256);
    const model = await modelArgument(flags.model);
    const args = {
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
    const progress = createProgress(process.stderr, flags.progress && !flags.json);
    let result: GenerateOutcome;
    if (flags.remote) {
      const target = await schedulerTarget(flags.remote);
      result = await generateRemote(target.addresses, args, progress, controller.signal, log, target.tls);
    } else {
      mesh = await startEmbedded({
        modelRoots: flags.modelsDir,
        executionProviders: parseExecutionProviders(flags.executionProviders),
        ...(model.directory ? { modelDirectories: [model.directory] } : {}),
        ...(flags.plans ? { plansFile: flags.plans } : {}),
        intraOpThreads: threads,
        maxBatch: 8,
        log,
      });
      result = await generate(mesh, args, progress, controller.signal);
    }
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } else {
      if (result.note) process.stderr.write(`note: ${result.note}\n`);
      const what = result.frames > 1 ? `${result.frames} frames, ${result.format}` : result.format;
      const strength = result.params.strength !== undefined ? `, strength ${result.params.strength}` : '';
      process.stdout.write(
        `wrote ${result.path} (${result.width}×${result.height}, ${what}; model ${args.model}, ` +
          `seed ${result.params.seed}, ${result.params.numInferenceSteps} steps, ` +
          `guidance ${result.params.guidanceScale}${strength}; ${(result.ms / 1000).toFixed(2)} s)\n`,
      );
    }
    return EXIT.ok;
  } catch (err) {
    return reportError(err, controller.signal.aborted);
  } finally {
    process.off('SIGINT', onSigint);
    await mesh?.close();
  }
}

/** Options every command that starts a generation takes. */
function withGenerationOptions(cmd: Command): Command {
  return cmd
    .option('-m, --model <name>', 'model name, or a model directory in the diffusers/optimum ONNX layout', 'diffmesh/tiny-shapes')
    .option('--seed <n>', 'unsigned 64-bit seed (default: random, printed)')
    .option('--steps <n>', 'denoising steps, 1–200 (default: the model’s)')
    .option('--guidance <x>', 'classifier-free guidance scale ≥ 0 (default: the model’s)')
    .option('--negative <text>', 'negative prompt', '')
    .option('--width <px>', 'width in pixels, a multiple of the model’s factor')
    .option('--height <px>', 'height in pixels, a multiple of the model’s factor')
    .option('--frames <n>', 'frames; more than 1 makes a video')
    .option('--fps <n>', 'frames per second of a video')
    .option('--image <file>', 'input image (PNG, JPEG or WebP) for a model that takes one: img2img, image-to-video')
    .option('--strength <x>', 'img2img strength in (0, 1]: how much of --image is noised away (default: the model’s, 0.8)')
    .option(
      '--step-cache <threshold>',
      'step caching: reuse the last denoiser output while its input changed less than this (relative L1, summed); 0 = off (default: the model’s, off)',
    )
    .option('--step-cache-max-skip <n>', 'step caching: most steps in a row that reuse one output (default: the model’s, 2)')
    .option('--priority <n>', 'scheduling priority (larger first)', '0')
    .option(
      '--deadline <duration>',
      'finish within this long from now, e.g. 30s, 2m, 1500ms (earliest deadline first within a priority; a scheduler that cannot make it refuses with DEADLINE_EXCEEDED)',
    );
}

/** `--remote` of the commands that only work against a running mesh (default: the local one). */
function remoteOption(): Option {
  return new Option('--remote <address>', "the scheduler's gRPC host:port ('local' = the mesh `diffmesh up` started)").default('local');
}

function ffmpegOption(): Option {
  return new Option('--ffmpeg <path>', 'ffmpeg binary for .mp4').env('DIFFMESH_FFMPEG').default('ffmpeg');
}

function logLevelOption(): Option {
  return new Option('--log-level <level>', 'log level on stderr')
    .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .env('DIFFMESH_LOG_LEVEL')
    .default('warn');
}

/**
 * `--remote`: one or more scheduler addresses (`host:port[,host:port…]`; any of them serves
 * any request), or `local` for the schedulers of the mesh `diffmesh up` started here; with
 * the TLS files to call them with (see {@link clientTls}): the local mesh's client
 * certificate, found through its state file.
 */
async function schedulerTarget(remote: string): Promise<{ addresses: string[]; tls?: TlsFiles }> {
  const state = await readState();
  const withTls = (addresses: string[]): { addresses: string[]; tls?: TlsFiles } => {
    const tls = clientTls(addresses, state);
    return { addresses, ...(tls ? { tls } : {}) };
  };
  if (remote !== 'local') {
    const list = remote
      .split(',')
      .map((a) => a.trim())
      .filter((a) => a !== '');
    if (list.length === 0) throw invalidParameter('remote', 'expected host:port[,host:port…] or local');
    return withTls(list);
  }
  if (!state) {
    throw new DiffmeshError(
      Code.UNAVAILABLE,
      'TRANSPORT',
      'no running mesh found on this machine; start one with `diffmesh up`, or give --remote host:port',
    );
  }
  return withTls(state.schedulerAddresses?.length ? state.schedulerAddresses : [state.schedulerAddress]);
}

async function runSubmit(prompt: string, flags: SubmitFlags): Promise<number> {
  try {
    const log = createLogger({ name: 'diffmesh', level: 'warn' });
    const params = parseParams(flags);
    const priority = parseInteger(flags.priority, 'priority', -1_000_000, 1_000_000);
    const timeoutMs = flags.timeoutMs === undefined ? 0 : parseInteger(flags.timeoutMs, 'timeout_ms', 1, 2 ** 31 - 1);
    const image = flags.image !== undefined ? await readInputImage(flags.image) : undefined;
    const target = await schedulerTarget(flags.remote);
    const answer = await submitRemote(
      target.addresses,
      {
        model: (await modelArgument(flags.model)).id,
        prompt,
        params,
        priority,
        timeoutMs,
        ...(flags.deadline !== undefined ? { deadline: parseDeadline(flags.deadline) } : {}),
        requestId: flags.requestId ?? '',
        ...(image ? { image } : {}),
      },
      log,
      target.tls,
    );
    if (flags.json)
      process.stdout.write(`${JSON.stringify({ reqId: answer.reqId, status: statusName(answer.status), existing: answer.existing })}\n`);
    else process.stdout.write(`${answer.reqId}\n`);
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

async function runWatch(reqId: string, flags: WatchFlags): Promise<number> {
  const log = createLogger({ name: 'diffmesh', level: flags.logLevel as LogLevel });
  const controller = new AbortController();
  const onSigint = (): void => controller.abort();
  process.once('SIGINT', onSigint);
  try {
    const target = await schedulerTarget(flags.remote);
    const outcome = await watchRemote(
      target.addresses,
      {
        reqId: parseReqId(reqId),
        output: flags.output,
        fps: flags.fps === undefined ? undefined : parseInteger(flags.fps, 'fps', 1, 240),
        ffmpegPath: flags.ffmpeg,
      },
      createProgress(process.stderr, flags.progress && !flags.json),
      controller.signal,
      log,
      target.tls,
    );
    if (flags.json) process.stdout.write(`${JSON.stringify({ ...outcome, status: 'completed' })}\n`);
    else if (outcome.file) {
      if (outcome.file.note) process.stderr.write(`note: ${outcome.file.note}\n`);
      process.stdout.write(
        `completed; wrote ${outcome.file.path} (${outcome.file.width}×${outcome.file.height}, ${outcome.file.frames > 1 ? `${outcome.file.frames} frames, ` : ''}${outcome.file.format})\n`,
      );
    } else process.stdout.write('completed\n');
    return EXIT.ok;
  } catch (err) {
    if (controller.signal.aborted) {
      process.stderr.write('diffmesh: stopped watching; the request goes on\n');
      return EXIT.interrupted;
    }
    return reportError(err, false);
  } finally {
    process.off('SIGINT', onSigint);
  }
}

async function runCancel(reqId: string, flags: { remote: string; reason: string }): Promise<number> {
  try {
    const log = createLogger({ name: 'diffmesh', level: 'warn' });
    const target = await schedulerTarget(flags.remote);
    const { status } = await cancelRemote(target.addresses, parseReqId(reqId), flags.reason, log, target.tls);
    const name = statusName(status);
    process.stdout.write(
      name === 'cancelled' ? 'cancelled\n' : `not cancelled: the request had already ${name === 'completed' ? 'completed' : 'failed'}\n`,
    );
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  }
}

async function runModels(flags: { remote: string; json?: boolean }): Promise<number> {
  let client: ReturnType<typeof connectScheduler> | undefined;
  try {
    const target = await schedulerTarget(flags.remote);
    client = connectScheduler(target.addresses, createLogger({ name: 'diffmesh', level: 'warn' }), target.tls);
    const { models } = await client.listModels({ timeoutMs: 10_000 });
    const rows = models.map((m) => ({
      model: m.name,
      pattern: m.pattern,
      modalities: m.modalities.map((x) => x.replace('MODALITY_', '').toLowerCase().replace(/_/g, '-')),
      ready: m.ready,
      unavailablePools: m.unavailablePools,
    }));
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(rows)}\n`);
      return EXIT.ok;
    }
    const width = Math.max(5, ...rows.map((r) => r.model.length));
    process.stdout.write(`${'MODEL'.padEnd(width)}  STATUS      MODALITIES\n`);
    for (const r of rows) {
      const status = r.ready ? 'ready' : 'registered';
      const why = r.ready ? '' : `  (no instance in ${r.unavailablePools.join(', ')})`;
      process.stdout.write(
        `${(r.model + (r.pattern ? ' (pattern)' : '')).padEnd(width)}  ${status.padEnd(10)}  ${r.modalities.join(', ')}${why}\n`,
      );
    }
    return EXIT.ok;
  } catch (err) {
    return reportError(err, false);
  } finally {
    await client?.close();
  }
}

/** `REQUEST_STATUS_CANCELLED` → `cancelled`. */
function statusName(status: unknown): string {
  return String(status)
    .replace(/^REQUEST_STATUS_/, '')
    .toLowerCase();
}

function reportError(err: unknown, interrupted: boolean): number {
  if (interrupted) {
    process.stderr.write('diffmesh: interrupted; nothing written\n');
    return EXIT.interrupted;
  }
  if (err instanceof DiffmeshError) {
    const field = err.field;
    const flag = field ? FLAG_OF_FIELD[field] : undefined;
    const where = flag && flag !== field ? ` (${flag})` : '';
    process.stderr.write(`diffmesh: ${err.message}${where}\n`);
    if (isUnreachable(err)) return EXIT.unreachable;
    return err.code === 3 || err.code === 5 || err.code === 9 ? EXIT.usage : EXIT.failed;
  }
  process.stderr.write(`diffmesh: ${err instanceof Error ? err.message : String(err)}\n`);
  return EXIT.failed;
}

function parseParams(f: GenerationFlags): Partial<GenerationParams> {
  const p: Partial<GenerationParams> = { negativePrompt: f.negative ?? '' };
  if (f.seed !== undefined) {
    if (!/^\d+$/.test(f.seed) || BigInt(f.seed) >= 2n ** 64n) {
      throw invalidParameter('seed', `expected an unsigned 64-bit integer, got "${f.seed}"`);
    }
    p.seed = f.seed;
  }
  if (f.steps !== undefined) p.numInferenceSteps = parseInteger(f.steps, 'num_inference_steps');
  if (f.guidance !== undefined) p.guidanceScale = parseNumber(f.guidance, 'guidance_scale');
  if (f.width !== undefined) p.width = parseInteger(f.width, 'width');
  if (f.height !== undefined) p.height = parseInteger(f.height, 'height');
  if (f.frames !== undefined) p.numFrames = parseInteger(f.frames, 'num_frames');
  if (f.fps !== undefined) p.fps = parseInteger(f.fps, 'fps');
  if (f.strength !== undefined) {
    const strength = parseNumber(f.strength, 'strength');
    // Checked here too, so that a bad value is refused before an image is read or a mesh is reached.
    if (strength <= 0 || strength > 1) throw invalidParameter('strength', `must be a number greater than 0 and at most 1, got ${strength}`);
    if (f.image === undefined) throw invalidParameter('strength', 'applies only with an input image (give --image)');
    p.strength = strength;
  }
  if (f.stepCache !== undefined || f.stepCacheMaxSkip !== undefined) {
    const threshold = f.stepCache !== undefined ? parseNumber(f.stepCache, 'step_cache.threshold') : undefined;
    if (threshold !== undefined && threshold < 0) throw invalidParameter('step_cache.threshold', `must be ≥ 0 (0 = off), got ${threshold}`);
    const maxSkippedSteps =
      f.stepCacheMaxSkip !== undefined ? parseInteger(f.stepCacheMaxSkip, 'step_cache.max_skipped_steps', 0, 200) : undefined;
    p.stepCache = { ...(threshold !== undefined ? { threshold } : {}), ...(maxSkippedSteps !== undefined ? { maxSkippedSteps } : {}) };
  }
  return p;
}

/** `--preview-every` / `--preview-dir`: previews only when there is somewhere to write them. */
function parsePreview(f: Pick<GenerateFlags, 'previewDir' | 'previewEvery'>): Partial<GenerationParams> {
  if (f.previewDir === undefined) {
    if (f.previewEvery !== undefined) throw invalidParameter('preview.every_steps', 'needs --preview-dir (the folder the previews go to)');
    return {};
  }
  const everySteps = f.previewEvery === undefined ? 1 : parseInteger(f.previewEvery, 'preview.every_steps', 1, MAX_STEPS);
  return { preview: { everySteps, maxSide: DEFAULT_PREVIEW_SIDE } };
}

function parseExecutionProviders(raw: string): ExecutionProvider[] {
  const list = raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (list.length === 0) throw invalidParameter('execution_providers', 'list at least one, e.g. cpu');
  const unknown = list.find((p) => !(EXECUTION_PROVIDERS as readonly string[]).includes(p));
  if (unknown) throw invalidParameter('execution_providers', `unknown provider "${unknown}" (known: ${EXECUTION_PROVIDERS.join(', ')})`);
  return list as ExecutionProvider[];
}

function parseInteger(raw: string, field: string, min = -Infinity, max = Infinity): number {
  if (!/^-?\d+$/.test(raw.trim())) throw invalidParameter(field, `expected an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw invalidParameter(field, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function parseNumber(raw: string, field: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw invalidParameter(field, `expected a number, got "${raw}"`);
  return n;
}

/** This command's script (for `gpu check`'s child process): the package's bin, or what this process runs. */
function cliPath(): string {
  const bin = fileURLToPath(new URL('../bin/diffmesh.js', import.meta.url));
  return existsSync(bin) ? bin : (process.argv[1] ?? bin);
}
