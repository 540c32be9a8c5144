import { Option, type Command } from 'commander';
import type { LogLevel } from '@diffmesh/core/client';
import { collectLora } from './lora-options.js';

/** The flags of every command that starts a generation, as commander parses them. */
export interface GenerationFlags {
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
  /** `--lora NAME[:SCALE]`, repeated. */
  lora?: string[];
}

/** Options every command that starts a generation takes. */
export function withGenerationOptions(cmd: Command): Command {
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
    .option('--lora <name[:scale]>', 'a LoRA adapter by name, at a scale (default 1); repeat for several', collectLora)
    .option('--priority <n>', 'scheduling priority (larger first)', '0')
    .option(
      '--deadline <duration>',
      'finish within this long from now, e.g. 30s, 2m, 1500ms (earliest deadline first within a priority; a scheduler that cannot make it refuses with DEADLINE_EXCEEDED)',
    );
}

/** `--remote` of the commands that only work against a running mesh (default: the local one). */
export function remoteOption(): Option {
  return new Option('--remote <address>', "the scheduler's gRPC host:port ('local' = the mesh `diffmesh up` started)").default('local');
}

export function ffmpegOption(): Option {
  return new Option('--ffmpeg <path>', 'ffmpeg binary for .mp4').env('DIFFMESH_FFMPEG').default('ffmpeg');
}

/** Log levels of `--log-level` (those of @diffmesh/core's logger). */
export const LOG_LEVEL_CHOICES = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const satisfies readonly LogLevel[];

export function logLevelOption(): Option {
  return new Option('--log-level <level>', 'log level on stderr').choices(LOG_LEVEL_CHOICES).env('DIFFMESH_LOG_LEVEL').default('warn');
}

/** `--models-dir`; without it, the built-in models (resolved when the command runs). */
export function modelsDirOption(): Option {
  return new Option('--models-dir <dir...>', 'folders holding <org>/<name>/model.json (default: the built-in models)').env(
    'DIFFMESH_MODELS_DIR',
  );
}

/** The flags of `diffmesh generate`, as commander parses them. */
export interface GenerateFlags extends GenerationFlags {
  output?: string;
  modelsDir?: string[];
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
  loraDir?: string;
}

/** The flags of `diffmesh submit`, as commander parses them. */
export interface SubmitFlags extends GenerationFlags {
  remote: string;
  requestId?: string;
  timeoutMs?: string;
  json?: boolean;
}

/** The flags of `diffmesh watch`, as commander parses them. */
export interface WatchFlags {
  output?: string;
  fps?: string;
  remote: string;
  ffmpeg: string;
  logLevel: string;
  progress: boolean;
  json?: boolean;
}
