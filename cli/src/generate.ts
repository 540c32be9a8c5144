import { access, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import path from 'node:path';
import {
  Code,
  DiffmeshError,
  invalidParameter,
  type GenerationParams,
  type InputImageSource,
  type ObjectRef,
  type RequestEvent,
} from '@diffmesh/core/client';
import type { ResultFormat } from '@diffmesh/media';
import type { TensorStore } from '@diffmesh/tensor-client';
import type { Progress } from './progress.js';

/** What `diffmesh generate` was asked for, after flag parsing. */
export interface GenerateArgs {
  prompt: string;
  model: string;
  output: string | undefined;
  params: Partial<GenerationParams>;
  priority: number;
  /** When it must be done by (ms since the epoch; `--deadline`). */
  deadline?: number;
  ffmpegPath: string;
  /** The input image (`--image`), for a model that takes one. */
  image?: InputImageSource;
  /** Where live previews go (`--preview-dir`), as `step-NNN.png`. */
  previewDir?: string;
}

/** The result of a generation, for the summary line. */
export interface GenerateOutcome {
  path: string;
  note?: string;
  width: number;
  height: number;
  frames: number;
  format: string;
  params: GenerationParams;
  ms: number;
}

/** Where the file goes and in which format, decided before any work is done. */
export interface OutputPlan {
  path: string;
  format: ResultFormat;
  note?: string;
}

/** Still-picture formats by file extension. */
const IMAGE_EXTENSIONS: Record<string, ResultFormat> = { '.png': 'png', '.jpg': 'jpeg', '.jpeg': 'jpeg', '.webp': 'webp' };

/** Chooses the output file and format; rejects unsupported extensions and missing folders. */
export async function planOutput(output: string | undefined, frames: number, ffmpegPath: string): Promise<OutputPlan> {
  const wanted = output ?? (frames > 1 ? 'out.mp4' : 'out.png');
  const ext = path.extname(wanted).toLowerCase();
  let planned: OutputPlan;
  if (frames === 1 && IMAGE_EXTENSIONS[ext]) planned = { path: wanted, format: IMAGE_EXTENSIONS[ext] };
  else if (frames === 1 && !['.mp4', '.webm', '.gif', '.apng'].includes(ext)) {
    throw invalidParameter('output', `unsupported image extension "${ext || '(none)'}" in "${wanted}"; use .png, .jpg or .webp`);
  } else {
    const { chooseVideoFormat, ffmpegAvailable } = await import('@diffmesh/media');
    planned = chooseVideoFormat(wanted, ext === '.mp4' || ext === '.webm' ? await ffmpegAvailable(ffmpegPath) : false);
  }
  await checkOutputFolder(planned.path);
  return planned;
}

/** Refuses an output file whose folder does not exist or is not writable (field `output`). */
export async function checkOutputFolder(file: string): Promise<void> {
  const dir = path.dirname(path.resolve(file));
  try {
    await access(dir, constants.W_OK);
  } catch {
    throw invalidParameter('output', `folder "${dir}" does not exist or is not writable`);
  }
}

/**
 * Shows a request's events until the end; returns its outputs or throws its error. With
 * `previewDir`, writes each live preview there as `step-NNN.png`.
 */
export async function follow(
  events: AsyncIterable<RequestEvent>,
  progress: Progress,
  previewDir?: string,
): Promise<Record<string, ObjectRef>> {
  let outputs: Record<string, ObjectRef> | undefined;
  if (previewDir !== undefined) await mkdir(previewDir, { recursive: true });
  try {
    for await (const e of events) {
      if (e.type === 'preview') {
        if (previewDir !== undefined) await writeFile(path.join(previewDir, `step-${String(e.step).padStart(3, '0')}.png`), e.data);
        continue;
      }
      progress.update(e);
      outputs = terminal(e) ?? outputs;
    }
  } finally {
    progress.stop();
  }
  if (!outputs?.pixels) throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'generation finished without pixels');
  return outputs;
}

function terminal(e: RequestEvent): Record<string, ObjectRef> | undefined {
  if (e.type === 'completed') return e.outputs;
  if (e.type === 'failed') {
    throw new DiffmeshError(e.error.code, e.error.reason as DiffmeshError['reason'], e.error.message, {
      metadata: e.error.field ? { field: e.error.field } : {},
    });
  }
  if (e.type === 'cancelled') throw new DiffmeshError(Code.CANCELLED, 'CANCELLED', 'generation cancelled');
  return undefined;
}

/** Fetches the pixels and writes the file atomically in the planned format. */
export async function writeResult(
  store: TensorStore,
  ref: ObjectRef,
  out: OutputPlan,
  fps: number,
  ffmpegPath: string,
  signal: AbortSignal,
): Promise<Omit<GenerateOutcome, 'params' | 'ms'>> {
  const { data } = await store.get(ref);
  const [frames, height, width] = ref.shape;
  const frameBytes = width * height * 3;
  const list = Array.from({ length: frames }, (_, f) => data.subarray(f * frameBytes, (f + 1) * frameBytes));
  const { encodeResult } = await import('@diffmesh/media');
  const { bytes } = await encodeResult({ width, height, frames: list }, out.format, { fps, ffmpegPath, signal });
  const target = path.resolve(out.path);
  const tmpDir = await mkdtemp(path.join(path.dirname(target), '.diffmesh-'));
  try {
    const tmp = path.join(tmpDir, path.basename(target));
    await writeFile(tmp, bytes);
    await rename(tmp, target);
  } finally {
    await rm(tmpDir, { recursive: true, force: true });
  }
  return { path: out.path, ...(out.note ? { note: out.note } : {}), width, height, frames, format: out.format };
}
