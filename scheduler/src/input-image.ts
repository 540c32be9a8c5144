/**
 * Input images at admission. A request with an input image (img2img, image-to-video) has it
 * checked, stored as the request's object `input_image` (the encoded bytes: dtype uint8, shape
 * [byte length]) and its ref recorded in the RequestContext's refs, so the stage that takes it
 * finds it in `task.inputs.input_image`. The bytes never travel in the params: request state
 * may live in stores whose values hold about 1 MiB.
 */
import { randomUUID } from 'node:crypto';
import { MAX_INPUT_IMAGE_BYTES, probeImage } from '@diffmesh/media';
import { Code, DiffmeshError, invalidParameter, type InputImageSource, type ObjectRef } from '@diffmesh/core';
import type { TensorStore } from '@diffmesh/tensor-client';
import { resolveParams } from './plans/params.js';
import { INPUT_IMAGE, requestPlan } from './request-plan.js';
import { checkRequestId, type Scheduler } from './scheduler.js';
import type { GenerateRequest, RequestState } from './types.js';

/**
 * Submits a request with its input image, if it has one (without one this is
 * `scheduler.submit(req)`). The image is checked (a corrupt, oversized or foreign image is
 * INVALID_ARGUMENT naming `input_image`) and stored before the request is accepted; a request
 * refused after that has its image deleted again, so a refusal leaves nothing behind. A
 * repeated client request id answers with the existing request and stores nothing.
 */
export async function submitWithInputImage(
  scheduler: Scheduler,
  req: GenerateRequest,
  image: InputImageSource | undefined,
): Promise<RequestState> {
  if (!image) return scheduler.submit(req);
  if (req.requestId) {
    checkRequestId(req.requestId);
    if (await known(scheduler, req.requestId)) return scheduler.submit(req);
  }
  // Refusals that cost nothing come before any bytes move: unknown model, a model that takes
  // no image, a bad parameter.
  const entry = scheduler.registry.lookup(req.model);
  requestPlan(entry, req.model, [INPUT_IMAGE]);
  resolveParams(entry, { ...req.params }, { inputImage: true, randomSeed: () => '0' });

  const { store } = scheduler;
  const bytes = await imageBytes(store, image);
  await probeImage(bytes, INPUT_IMAGE);
  const reqId = req.requestId || randomUUID();
  const ref = await store.put(
    { requestId: reqId, name: INPUT_IMAGE, data: bytes, shape: [bytes.byteLength], dtype: 'uint8' },
    // The image must outlive the request's wait in the queues.
    req.timeoutMs ? { ttlMs: req.timeoutMs } : {},
  );
  let state: RequestState;
  try {
    state = await scheduler.submit({ ...req, requestId: reqId, inputs: { ...req.inputs, [INPUT_IMAGE]: ref } });
  } catch (err) {
    await discard(scheduler, ref);
    throw err;
  }
  // The same request id accepted meanwhile by another call: that request keeps its own image.
  if (state.context.refs[INPUT_IMAGE]?.objectId !== ref.objectId) void discard(scheduler, ref);
  return state;
}

/** The encoded bytes of an input image: as given, or read from the tensor service that holds them. */
async function imageBytes(store: TensorStore, image: InputImageSource): Promise<Uint8Array> {
  if (image.kind === 'data') return image.data;
  const ref = image.ref;
  if (ref.dtype !== 'uint8' || ref.shape.length !== 1) {
    throw invalidParameter(
      INPUT_IMAGE,
      `ref "${ref.objectId}" is ${ref.dtype}[${ref.shape.join(', ')}]; an encoded image is a uint8 object of shape [bytes]`,
    );
  }
  if (ref.sizeBytes > MAX_INPUT_IMAGE_BYTES) {
    throw invalidParameter(INPUT_IMAGE, `is ${ref.sizeBytes} bytes; at most ${MAX_INPUT_IMAGE_BYTES} are accepted`);
  }
  try {
    return (await store.get(ref)).data;
  } catch (err) {
    if (err instanceof DiffmeshError && err.code === Code.NOT_FOUND) {
      throw new DiffmeshError(Code.NOT_FOUND, err.reason, `${INPUT_IMAGE}: ${err.message}`, { metadata: { field: INPUT_IMAGE } });
    }
    throw err;
  }
}

async function discard(scheduler: Scheduler, ref: ObjectRef): Promise<void> {
  try {
    await scheduler.store.delete(ref);
  } catch (err) {
    scheduler.log.warn({ err, objectId: ref.objectId }, 'could not delete the input image of a refused request');
  }
}

async function known(scheduler: Scheduler, reqId: string): Promise<boolean> {
  try {
    await scheduler.get(reqId);
    return true;
  } catch {
    return false;
  }
}
