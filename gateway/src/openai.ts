/**
 * OpenAI/SGLang-compatible endpoints: image generations, the model list and asynchronous
 * video jobs. They call the scheduler through the same pool as the proto routes; pixels come
 * from the tensor service named in the Completed event's ObjectRef.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  SERVICE_NAMES,
  messageCodec,
  type ModelInfo__Output,
  type RequestEvent__Output,
  type StatRequest,
  type StatResponse__Output,
} from '@diffmesh/protos';
import {
  Code,
  DiffmeshError,
  MAX_SEED,
  cancelled,
  errorDetailFromWire,
  globToRegExp,
  objectRefFromWire,
  paramsToWire,
  randomSeed,
  timestampToWire,
  unknownModel,
  type GenerationParams,
  type InputImageSource,
  type Logger,
  type ObjectRef,
} from '@diffmesh/core';
import { encodeImage } from '@diffmesh/media';
import { type TensorStore } from '@diffmesh/tensor-client';
import { optAdapters } from './adapter-params.js';
import { HttpStatusError, gatewayError } from './errors.js';
import { header, sendBytes, sendJson } from './http-util.js';
import { inputImageParam } from './input-images.js';
import { checkPromptLength } from './limits.js';
import { fetchFrames } from './media.js';
import { describeValue, preview, previewName, smallBigInt } from './proto-json.js';
import type { GatewayMetrics } from './metrics.js';
import type { ResultStore } from './results.js';
import type { SchedulerClient, UpstreamPool } from '@diffmesh/client';
import type { VideoJobs, VideoSpec } from './videos.js';

/** What the OpenAI endpoints need. */
export interface OpenAiDeps {
  api: SchedulerClient;
  store: TensorStore;
  results: ResultStore;
  /** Tensor services, to find an object by id. */
  tensors: UpstreamPool;
  videos: VideoJobs;
  models: ServedModelCache;
  metrics: GatewayMetrics;
  maxBodyBytes: number;
  maxPromptChars: number;
  /** Largest input image (an upload or a data URL's bytes). */
  maxImageBytes: number;
  /** Base URL for result URLs; '' = from the request's Host header. */
  publicUrl: string;
  log: Logger;
}

/** Per-request hook: maps a mesh field name in an error to the OpenAI parameter the client sent. */
export type ParamMapper = (field: string) => string;

type Modality = 'MODALITY_TEXT_TO_IMAGE' | 'MODALITY_TEXT_TO_VIDEO' | 'MODALITY_IMAGE_TO_IMAGE' | 'MODALITY_IMAGE_TO_VIDEO';

/** The models the schedulers serve (ListModels), cached briefly: what the OpenAI routes list and check models against. */
export class ServedModelCache {
  constructor(
    private readonly api: SchedulerClient,
    private readonly ttlMs = 5000,
    private readonly cache: { value?: { at: number; models: ModelInfo__Output[] } } = {},
  ) {}

  /** This directory asking the schedulers through `api` (a caller's view), with the same cache. */
  through(api: SchedulerClient): ServedModelCache {
    return new ServedModelCache(api, this.ttlMs, this.cache);
  }

  async list(signal?: AbortSignal): Promise<ModelInfo__Output[]> {
    const cached = this.cache.value;
    if (cached && Date.now() - cached.at < this.ttlMs) return cached.models;
    const res = await this.api.listModels(signal ? { signal } : {});
    this.cache.value = { at: Date.now(), models: res.models };
    return res.models;
  }

  /** The entry serving `name` (exact first, then patterns), or the first model of `modality`. */
  async resolve(name: string | undefined, modality: Modality, signal?: AbortSignal): Promise<{ name: string; info: ModelInfo__Output }> {
    const models = await this.list(signal);
    if (name === undefined) {
      const first = models.find((m) => !m.pattern && m.modalities.includes(modality));
      if (!first) {
        throw gatewayError(
          Code.INVALID_ARGUMENT,
          'INVALID_PARAMETER',
          `no model for ${modality.replace('MODALITY_', '').toLowerCase().replace(/_/g, '-')}; name one`,
          { field: 'model' },
        );
      }
      return { name: first.name, info: first };
    }
    const info = models.find((m) => !m.pattern && m.name === name) ?? models.find((m) => m.pattern && globToRegExp(m.name).test(name));
    if (!info)
      throw unknownModel(
        preview(name),
        models.filter((m) => !m.pattern).map((m) => m.name),
      );
    if (!info.modalities.includes(modality)) {
      throw gatewayError(
        Code.INVALID_ARGUMENT,
        'INVALID_PARAMETER',
        `"${preview(name)}" does not do ${modality.replace('MODALITY_', '').toLowerCase().replace(/_/g, '-')}`,
        {
          field: 'model',
        },
      );
    }
    return { name, info };
  }
}

// ---------------------------------------------------------------------------------------
// Input checks, OpenAI style: each error names the parameter.

/** Largest value of a uint32 request field: a larger one would wrap around on the wire. */
const UINT32_MAX = 2 ** 32 - 1;

function invalid(param: string, message: string): DiffmeshError {
  return gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', message, { field: param });
}

function rejectUnknown(body: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!known.includes(key)) throw invalid(previewName(key), `unrecognized request argument (supported: ${known.join(', ')})`);
  }
}

function optString(body: Record<string, unknown>, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(name, `expected a string, got ${describeValue(v)}`);
  return v;
}

/**
 * `deadline`: when the request must be done by, as an RFC 3339 time (`2026-11-27T08:00:00Z`) or
 * ms since the Unix epoch. The scheduler refuses one in the past, or one it cannot meet (504
 * DEADLINE_EXCEEDED / DEADLINE_UNREACHABLE) under its `refuse` deadline policy.
 */
function optDeadline(body: Record<string, unknown>): number | undefined {
  const raw = body.deadline;
  if (raw === undefined || raw === null || raw === '') return undefined;
  const ms =
    typeof raw === 'number'
      ? raw
      : typeof raw === 'string' && /^\d+$/.test(raw.trim())
        ? Number(raw)
        : typeof raw === 'string'
          ? Date.parse(raw)
          : NaN;
  if (!Number.isFinite(ms) || ms <= 0) {
    throw invalid('deadline', `expected an RFC 3339 time (e.g. "2026-01-01T12:00:00Z") or ms since the epoch, got ${describeValue(raw)}`);
  }
  return Math.round(ms);
}

function prompt(body: Record<string, unknown>, name: string, maxChars: number, required: boolean): string | undefined {
  const v = optString(body, name);
  if (required && (v === undefined || v.trim() === '')) throw invalid(name, 'is required');
  if (v !== undefined) checkPromptLength(name, v, maxChars);
  return v;
}

function optNumber(
  body: Record<string, unknown>,
  name: string,
  opts: { integer?: boolean; min?: number; max?: number } = {},
): number | undefined {
  const raw = body[name];
  if (raw === undefined || raw === null || raw === '') return undefined;
  const v = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
  const kind = opts.integer ? 'an integer' : 'a number';
  if (typeof v !== 'number' || !Number.isFinite(v) || (opts.integer && !Number.isInteger(v))) {
    throw invalid(name, `expected ${kind}, got ${describeValue(raw)}`);
  }
  if ((opts.min !== undefined && v < opts.min) || (opts.max !== undefined && v > opts.max)) {
    throw invalid(name, `must be ${kind} from ${opts.min ?? '-∞'} to ${opts.max ?? '∞'}, got ${v}`);
  }
  return v;
}

function optSeed(body: Record<string, unknown>): bigint | undefined {
  const raw = body.seed;
  if (raw === undefined || raw === null || raw === '') return undefined;
  let n: bigint | undefined;
  if (typeof raw === 'number' && Number.isSafeInteger(raw)) n = BigInt(raw);
  else if (typeof raw === 'string' && /^\d+$/.test(raw.trim())) n = smallBigInt(raw.trim());
  if (n === undefined || n < 0n || n > MAX_SEED)
    throw invalid('seed', `must be an integer from 0 to ${MAX_SEED}, got ${describeValue(raw)}`);
  return n;
}

function optSize(body: Record<string, unknown>): { width: number; height: number } | undefined {
  const v = optString(body, 'size');
  if (v === undefined || v === 'auto') return undefined;
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(v.trim());
  if (!m) throw invalid('size', `expected "WIDTHxHEIGHT" such as "256x256", got ${describeValue(v)}`);
  return { width: Number(m[1]), height: Number(m[2]) };
}

/** Mesh parameter names → the OpenAI parameter the client used. */
function mapper(extra: Record<string, string> = {}): ParamMapper {
  const names: Record<string, string> = { width: 'size', height: 'size', ...extra };
  return (field) => {
    const name = field.replace(/^params\./, '');
    return Object.hasOwn(names, name) ? names[name] : name;
  };
}

/** The error a request's final event carries (or undefined for Completed). */
function endError(e: RequestEvent__Output): DiffmeshError | undefined {
  if (e.failed)
    return e.failed.error ? errorDetailFromWire(e.failed.error) : new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'generation failed');
  if (e.cancelled) return cancelled('generation cancelled');
  return undefined;
}

function baseUrl(deps: OpenAiDeps, req: IncomingMessage): string {
  if (deps.publicUrl) return deps.publicUrl;
  const proto = (header(req, 'x-forwarded-proto') ?? '').split(',')[0].trim() === 'https' ? 'https' : 'http';
  return `${proto}://${header(req, 'host') ?? 'localhost'}`;
}

// ---------------------------------------------------------------------------------------
// POST /v1/images/generations

const IMAGE_FIELDS = [
  'prompt',
  'model',
  'n',
  'size',
  'response_format',
  'negative_prompt',
  'num_inference_steps',
  'guidance_scale',
  'seed',
  'priority',
  'deadline',
  // LoRA adapters, [{ name, scale }] (the SDKs' extra_body).
  'adapters',
  // Accepted for compatibility; they change nothing here.
  'quality',
  'style',
  'user',
  'moderation',
  'background',
  'output_format',
] as const;

/** Runs one Generate to its end and returns the pixels' ref. */
async function generateOne(
  api: SchedulerClient,
  model: string,
  params: Partial<GenerationParams> & { prompt: string },
  priority: number,
  signal: AbortSignal,
  image?: InputImageSource,
  deadline?: number,
): Promise<ObjectRef> {
  const request = { model, params: paramsToWire(params, image), priority, ...(deadline ? { deadline: timestampToWire(deadline) } : {}) };
  for await (const e of api.generate(request, { signal })) {
    if (e.completed) {
      const ref = e.completed.results.find((r) => r.name === 'pixels') ?? e.completed.results[0];
      if (!ref) throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', 'generation finished without pixels');
      return objectRefFromWire(ref);
    }
    const err = endError(e);
    if (err) throw err;
  }
  throw new DiffmeshError(Code.UNAVAILABLE, 'TRANSPORT', 'the scheduler ended the request without a result', { retryAfterMs: 1000 });
}

/** The parameters `/v1/images/generations` and `/v1/images/edits` share, checked. */
function imageOptions(deps: OpenAiDeps, body: Record<string, unknown>) {
  const text = prompt(body, 'prompt', deps.maxPromptChars, true)!;
  const negative = prompt(body, 'negative_prompt', deps.maxPromptChars, false);
  const n = optNumber(body, 'n', { integer: true, min: 1, max: 4 }) ?? 1;
  const size = optSize(body);
  const format = optString(body, 'response_format') ?? 'b64_json';
  if (format !== 'b64_json' && format !== 'url')
    throw invalid('response_format', `must be "b64_json" or "url", got ${describeValue(format)}`);
  const outputFormat = optString(body, 'output_format');
  if (outputFormat !== undefined && outputFormat !== 'png') throw invalid('output_format', 'only "png" is supported');
  const steps = optNumber(body, 'num_inference_steps', { integer: true, min: 1, max: UINT32_MAX });
  const guidance = optNumber(body, 'guidance_scale', { min: 0 });
  const priority = optNumber(body, 'priority', { integer: true, min: -(2 ** 31), max: 2 ** 31 - 1 }) ?? 0;
  const seed = optSeed(body) ?? BigInt(randomSeed());
  const deadline = optDeadline(body);
  const adapters = optAdapters(body);
  const params: Partial<GenerationParams> & { prompt: string } = {
    prompt: text,
    ...(negative !== undefined ? { negativePrompt: negative } : {}),
    ...(size ?? {}),
    numFrames: 1,
    ...(steps !== undefined ? { numInferenceSteps: steps } : {}),
    ...(guidance !== undefined ? { guidanceScale: guidance } : {}),
    ...(adapters ? { adapters } : {}),
  };
  return { params, n, format, priority, seed, deadline };
}

export async function createImages(
  deps: OpenAiDeps,
  req: IncomingMessage,
  res: ServerResponse,
  body: Record<string, unknown>,
  signal: AbortSignal,
  setMapper: (m: ParamMapper) => void,
): Promise<void> {
  setMapper(mapper());
  rejectUnknown(body, IMAGE_FIELDS);
  const options = imageOptions(deps, body);
  const model = await deps.models.resolve(optString(body, 'model'), 'MODALITY_TEXT_TO_IMAGE', signal);
  await runImages(deps, req, res, model.name, options, signal);
}

/**
 * Runs `n` generations (an image each) in parallel with seeds seed, seed+1, … and answers with
 * the images, OpenAI style. The first failure cancels the others.
 */
async function runImages(
  deps: OpenAiDeps,
  req: IncomingMessage,
  res: ServerResponse,
  modelName: string,
  options: ReturnType<typeof imageOptions>,
  signal: AbortSignal,
  image?: InputImageSource,
): Promise<void> {
  const { params, n, format, priority, seed, deadline } = options;
  const model = { name: modelName };
  // n requests with consecutive seeds; the first failure cancels the others.
  const group = new AbortController();
  const onAbort = (): void => group.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  const runs = Array.from({ length: n }, (_, i) =>
    generateOne(
      deps.api,
      model.name,
      { ...params, seed: ((seed + BigInt(i)) % (MAX_SEED + 1n)).toString() },
      priority,
      group.signal,
      image,
      deadline,
    ),
  );
  let refs: ObjectRef[];
  try {
    refs = await Promise.all(
      runs.map((p) =>
        p.catch((err: unknown) => {
          group.abort();
          throw err;
        }),
      ),
    );
  } catch (err) {
    const done = await Promise.allSettled(runs);
    for (const r of done) if (r.status === 'fulfilled') void deps.store.delete(r.value).catch(() => undefined);
    throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }

  const data: Record<string, unknown>[] = [];
  try {
    for (const ref of refs) {
      if (format === 'b64_json') {
        const { width, height, frames } = await fetchFrames(deps.store, ref);
        data.push({ b64_json: (await encodeImage({ width, height, data: frames[0] }, 'png')).toString('base64') });
      } else {
        const { id } = await deps.results.put(ref);
        data.push({ url: `${baseUrl(deps, req)}/v1/images/results/${id}.png` });
      }
    }
  } finally {
    if (format === 'b64_json') for (const ref of refs) void deps.store.delete(ref).catch(() => undefined);
  }
  deps.metrics.images.inc({ model: model.name }, n);
  const first = refs[0];
  sendJson(res, 200, {
    created: Math.floor(Date.now() / 1000),
    data,
    output_format: 'png',
    size: `${first.shape[2]}x${first.shape[1]}`,
  });
}

// ---------------------------------------------------------------------------------------
// POST /v1/images/edits

/** Form fields of `/v1/images/edits` that take a file. */
export const EDIT_FILE_FIELDS = ['image', 'image[]', 'mask'] as const;

const EDIT_FIELDS = [
  ...IMAGE_FIELDS,
  'image',
  'image[]',
  // JSON bodies: `images: [{ image_url: "data:…" }]`.
  'images',
  'mask',
  // diffmesh's extension: img2img strength in (0, 1].
  'strength',
  // Accepted for compatibility; they change nothing here.
  'input_fidelity',
  'output_compression',
  'partial_images',
  'stream',
] as const;

/** The one input image of an edit: `image` (or the SDK's `image[]`), or a JSON body's `images[0]`. */
function editImageValue(body: Record<string, unknown>): { value: unknown; param: string } {
  const given = (['image', 'image[]', 'images'] as const).filter((k) => body[k] !== undefined && body[k] !== null);
  if (given.length === 0) throw invalid('image', 'is required: the image to edit (a PNG, JPEG or WebP file)');
  if (given.length > 1) throw invalid(given[1], `give one of ${given.join(', ')}, not both`);
  const param = given[0];
  const value = body[param];
  if (param !== 'images') return { value, param };
  if (!Array.isArray(value)) throw invalid('images', `expected an array of { "image_url": … }, got ${describeValue(value)}`);
  if (value.length !== 1) throw invalid('images', `one input image is supported, got ${value.length}`);
  return { value: value[0], param: 'images' };
}

/**
 * POST /v1/images/edits (OpenAI's image edit; img2img here): `image` (a PNG, JPEG or WebP
 * file), `prompt`, and the parameters of `/v1/images/generations`, plus `strength` in (0, 1].
 * Runs on a model that takes an input image (default: the first `image-to-image` model).
 */
export async function createImageEdit(
  deps: OpenAiDeps,
  req: IncomingMessage,
  res: ServerResponse,
  body: Record<string, unknown>,
  signal: AbortSignal,
  setMapper: (m: ParamMapper) => void,
): Promise<void> {
  rejectUnknown(body, EDIT_FIELDS);
  const { value, param } = editImageValue(body);
  setMapper(mapper({ input_image: param }));
  if (body.mask !== undefined) throw invalid('mask', 'masks (inpainting) are not supported: the whole image is edited');
  const stream = optString(body, 'stream');
  if (stream !== undefined && stream !== 'false') throw invalid('stream', 'streaming is not supported; leave stream unset or false');
  const options = imageOptions(deps, body);
  const strength = optNumber(body, 'strength', { min: 0, max: 1 });
  const image = await inputImageParam(value, param, deps.maxImageBytes);
  const model = await deps.models.resolve(optString(body, 'model'), 'MODALITY_IMAGE_TO_IMAGE', signal);
  const withStrength = { ...options, params: { ...options.params, ...(strength !== undefined ? { strength } : {}) } };
  await runImages(deps, req, res, model.name, withStrength, signal, image);
}

/** GET /v1/images/results/{id}: the PNG behind a `url` result, encoded as it is sent. */
export async function sendImageResult(deps: OpenAiDeps, res: ServerResponse, id: string): Promise<void> {
  const ref = deps.results.get(id);
  if (!ref)
    throw new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', 'no such image result (it may have expired)', {
      metadata: { field: 'result_id' },
    });
  const { width, height, frames } = await fetchFrames(deps.store, ref);
  await sendBytes(res, await encodeImage({ width, height, data: frames[0] }, 'png'), {
    'content-type': 'image/png',
    'cache-control': 'private, max-age=300',
  });
}

/**
 * GET /v1/images/objects/{object_id}.png: the first frame of a pixels object (a Completed
 * event's result) as PNG. The object is found by id on the tensor services (Stat), and its
 * bytes are read from the one that owns them. Needs an API key, like every object route, and
 * the object's capability (`?capability=`, from its ObjectRef) when the tensor services issue
 * them.
 */
export async function sendObjectImage(
  deps: OpenAiDeps,
  res: ServerResponse,
  objectId: string,
  capability: string,
  signal: AbortSignal,
): Promise<void> {
  const statReq = messageCodec<StatRequest>('diffmesh.tensor.v1.StatRequest');
  const statRes = messageCodec<object, StatResponse__Output>('diffmesh.tensor.v1.StatResponse');
  const bytes = await deps.tensors.unary(`/${SERVICE_NAMES.tensor}/Stat`, Buffer.from(statReq.encode({ objectId, capability })), {
    affinityKey: objectId,
    signal,
  });
  const wire = statRes.decode(bytes).ref;
  if (!wire)
    throw new DiffmeshError(Code.NOT_FOUND, 'OBJECT_NOT_FOUND', `object "${objectId}" not found`, { metadata: { field: 'object_id' } });
  const ref = objectRefFromWire(wire);
  if (ref.dtype !== 'uint8' || ref.shape.length !== 4 || ref.shape[3] !== 3) {
    throw invalid('object_id', `object "${objectId}" is ${ref.dtype}[${ref.shape.join(', ')}], not RGB pixels [frames, height, width, 3]`);
  }
  const { width, height, frames } = await fetchFrames(deps.store, ref);
  await sendBytes(res, await encodeImage({ width, height, data: frames[0] }, 'png'), {
    'content-type': 'image/png',
    'cache-control': 'private, max-age=300',
  });
}

// ---------------------------------------------------------------------------------------
// GET /v1/models

function modelObject(m: ModelInfo__Output): Record<string, unknown> {
  return {
    id: m.name,
    object: 'model',
    created: 0,
    owned_by: m.name.includes('/') ? m.name.slice(0, m.name.indexOf('/')) : 'diffmesh',
    modalities: m.modalities.map((x) => x.replace('MODALITY_', '').toLowerCase().replace(/_/g, '-')),
    // Whether the mesh can serve it now; a registered plan without instances is not ready.
    ready: m.ready,
    ...(m.ready ? {} : { unavailable_pools: m.unavailablePools }),
  };
}

export async function listModels(deps: OpenAiDeps, res: ServerResponse, signal: AbortSignal): Promise<void> {
  const models = await deps.models.list(signal);
  sendJson(res, 200, { object: 'list', data: models.filter((m) => !m.pattern).map(modelObject) });
}

export async function retrieveModel(deps: OpenAiDeps, res: ServerResponse, id: string, signal: AbortSignal): Promise<void> {
  const models = await deps.models.list(signal);
  const m = models.find((x) => !x.pattern && x.name === id);
  if (!m)
    throw unknownModel(
      id,
      models.filter((x) => !x.pattern).map((x) => x.name),
    );
  sendJson(res, 200, modelObject(m));
}

// ---------------------------------------------------------------------------------------
// /v1/videos

const VIDEO_FIELDS = [
  'prompt',
  'model',
  'size',
  'seconds',
  'num_frames',
  'fps',
  'seed',
  'negative_prompt',
  'num_inference_steps',
  'guidance_scale',
  'priority',
  'deadline',
  'adapters',
  // The image to start from (image-to-video): a file, a data URL, or { image_url } in JSON.
  'input_reference',
  // The openai SDK's form of { image_url } / { file_id }.
  'input_reference[image_url]',
  'input_reference[file_id]',
] as const;

/** Form fields of `/v1/videos` that take a file. */
export const VIDEO_FILE_FIELDS = ['input_reference'] as const;

export async function createVideo(
  deps: OpenAiDeps,
  res: ServerResponse,
  body: Record<string, unknown>,
  owner: string | undefined,
  signal: AbortSignal,
  setMapper: (m: ParamMapper) => void,
): Promise<void> {
  rejectUnknown(body, VIDEO_FIELDS);
  const reference = videoReference(body);
  const text = prompt(body, 'prompt', deps.maxPromptChars, true)!;
  const negative = prompt(body, 'negative_prompt', deps.maxPromptChars, false);
  const size = optSize(body);
  const secs = optNumber(body, 'seconds', { min: 0 });
  const frames = optNumber(body, 'num_frames', { integer: true, min: 1, max: UINT32_MAX });
  setMapper(
    mapper({
      num_frames: frames === undefined && secs !== undefined ? 'seconds' : 'num_frames',
      ...(reference ? { input_image: reference.param } : {}),
    }),
  );
  const fpsIn = optNumber(body, 'fps', { min: 1, max: 60 });
  const steps = optNumber(body, 'num_inference_steps', { integer: true, min: 1, max: UINT32_MAX });
  const guidance = optNumber(body, 'guidance_scale', { min: 0 });
  const priority = optNumber(body, 'priority', { integer: true, min: -(2 ** 31), max: 2 ** 31 - 1 }) ?? 0;
  const seed = optSeed(body);
  const deadline = optDeadline(body);
  const adapters = optAdapters(body);
  const image = reference ? await inputImageParam(reference.value, reference.param, deps.maxImageBytes) : undefined;
  const model = await deps.models.resolve(optString(body, 'model'), image ? 'MODALITY_IMAGE_TO_VIDEO' : 'MODALITY_TEXT_TO_VIDEO', signal);
  const d = model.info.defaults;
  const fps = fpsIn ?? (d?.fps || 8);
  // Without a length, a model's own clip length, or four seconds for a model whose default is a still.
  const modelFrames = d?.numFrames ?? 0;
  const numFrames =
    frames ?? (secs !== undefined ? Math.max(1, Math.round(secs * fps)) : modelFrames > 1 ? modelFrames : Math.round(4 * fps));
  if (numFrames > UINT32_MAX) throw invalid('seconds', `${secs} seconds at ${fps} fps is ${numFrames} frames; at most ${UINT32_MAX}`);
  const width = size?.width ?? d?.width ?? 0;
  const height = size?.height ?? d?.height ?? 0;
  const params: Partial<GenerationParams> & { prompt: string } = {
    prompt: text,
    ...(negative !== undefined ? { negativePrompt: negative } : {}),
    ...(size ?? {}),
    numFrames,
    fps,
    ...(steps !== undefined ? { numInferenceSteps: steps } : {}),
    ...(guidance !== undefined ? { guidanceScale: guidance } : {}),
    ...(seed !== undefined ? { seed: seed.toString() } : {}),
    ...(adapters ? { adapters } : {}),
  };
  const spec: VideoSpec = {
    model: model.name,
    prompt: text,
    width,
    height,
    numFrames,
    fps,
    // The stages the request runs: one that requires the image runs only with one.
    stages: (model.info.plan?.stages ?? [])
      .filter((s) => !s.requires || (s.requires === 'input_image' && image !== undefined))
      .map((s) => s.name.replace('STAGE_NAME_', '').toLowerCase()),
    request: {
      model: model.name,
      params: paramsToWire(params, image),
      priority,
      ...(deadline ? { deadline: timestampToWire(deadline) } : {}),
    },
  };
  const job = await deps.videos.create(spec, owner, signal, deps.api);
  deps.metrics.videos.inc({ model: model.name });
  sendJson(res, 200, job);
}

/** The image a video starts from, if the body gives one: `input_reference` (a file, a data URL or `{ image_url }`). */
function videoReference(body: Record<string, unknown>): { value: unknown; param: string } | undefined {
  const fileId = body['input_reference[file_id]'];
  if (fileId !== undefined) throw invalid('input_reference', 'file_id references are not supported; upload the file or give image_url');
  const url = body['input_reference[image_url]'];
  const direct = body.input_reference;
  if (url !== undefined && direct !== undefined) throw invalid('input_reference', 'give input_reference once');
  if (url !== undefined) return { value: url, param: 'input_reference' };
  if (direct === undefined || direct === null) return undefined;
  return { value: direct, param: 'input_reference' };
}

function videoNotFound(id: string): DiffmeshError {
  return new DiffmeshError(Code.NOT_FOUND, 'REQUEST_NOT_FOUND', `no video job "${id}" (it may have expired)`, {
    metadata: { field: 'video_id' },
  });
}

export function getVideo(deps: OpenAiDeps, res: ServerResponse, id: string, owner: string | undefined): void {
  const job = deps.videos.get(id, owner);
  if (!job) throw videoNotFound(id);
  sendJson(res, 200, job);
}

/** Query parameters of GET /v1/videos (OpenAI's list): `after`, `limit`, `order`. */
export const LIST_VIDEOS_QUERY = ['after', 'limit', 'order'] as const;

export function listVideos(deps: OpenAiDeps, res: ServerResponse, query: URLSearchParams, owner: string | undefined): void {
  const order = query.get('order') ?? 'desc';
  if (order !== 'asc' && order !== 'desc') throw invalid('order', `must be "asc" or "desc", got ${describeValue(order)}`);
  const limit = optNumber({ limit: query.get('limit') }, 'limit', { integer: true, min: 1, max: 100 });
  let data = deps.videos.list(owner); // newest first
  if (order === 'asc') data.reverse();
  const after = query.get('after');
  if (after !== null) {
    const i = data.findIndex((v) => v.id === after);
    if (i === -1) throw invalid('after', `no video job ${describeValue(after)}`);
    data = data.slice(i + 1);
  }
  const page = limit === undefined ? data : data.slice(0, limit);
  sendJson(res, 200, {
    object: 'list',
    data: page,
    has_more: page.length < data.length,
    first_id: page[0]?.id ?? null,
    last_id: page.at(-1)?.id ?? null,
  });
}

export async function deleteVideo(deps: OpenAiDeps, res: ServerResponse, id: string, owner: string | undefined): Promise<void> {
  const out = await deps.videos.delete(id, owner);
  if (!out) throw videoNotFound(id);
  sendJson(res, 200, out);
}

export async function sendVideoContent(
  deps: OpenAiDeps,
  res: ServerResponse,
  id: string,
  variant: string,
  owner: string | undefined,
): Promise<void> {
  const content = await deps.videos.content(id, variant, owner);
  if (!content) throw videoNotFound(id);
  const ext = content.format === 'mp4' ? 'mp4' : content.format;
  await sendBytes(res, content.bytes, {
    'content-type': content.mimeType,
    'x-diffmesh-video-format': content.format,
    'content-disposition': `inline; filename="${id}.${ext}"`,
    'cache-control': 'private, max-age=300',
  });
}

/** A route of the OpenAI-compatible surface. */
export const OPENAI_NOT_FOUND = (method: string, path: string): HttpStatusError =>
  new HttpStatusError(404, 'NOT_FOUND', `no route for ${method} ${path}`, 'UNKNOWN_ROUTE');
