import type * as grpc from '@grpc/grpc-js';
import type { GetResultRequest__Output, GetResultResponse } from '@diffmesh/protos';
import { Code, DiffmeshError, invalidParameter, toWire, type Logger, type ObjectRef } from '@diffmesh/core';
import { encodeResult, resultFormatFor, type EncodedResult } from '@diffmesh/media';
import type { TensorStore } from '@diffmesh/tensor-client';
import type { RequestState } from './types.js';

/** Bytes per chunk message of GetResult. */
export const RESULT_CHUNK_BYTES = 1024 * 1024;

/** What GetResult needs: the request's state, and the store its result lives in. */
export interface ResultServiceDeps {
  /** The request's state; throws NOT_FOUND for an unknown id. */
  get(reqId: string): RequestState | Promise<RequestState>;
  store: TensorStore;
  /** ffmpeg for MP4 and WebM. Default `ffmpeg` on PATH. */
  ffmpegPath?: string;
  log: Logger;
}

/** The pixels of a completed request; FAILED_PRECONDITION for any other. */
export function resultPixels(state: RequestState): ObjectRef {
  const { reqId, status } = state.context;
  if (status !== 'completed') {
    const how = status === 'failed' || status === 'cancelled' ? `was ${status}` : `is ${status}`;
    throw new DiffmeshError(Code.FAILED_PRECONDITION, 'REQUEST_NOT_FINISHED', `request ${reqId} ${how}; it has no result`, {
      metadata: { req_id: reqId, status },
    });
  }
  const pixels = state.result.pixels;
  if (!pixels) throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', `request ${reqId} completed without pixels`);
  return pixels;
}

/**
 * Encodes the result of a completed request in the asked format. The frames come from the
 * tensor store that holds them (by the result's ObjectRef); encoding uses the same media
 * encoders as the CLI and the gateway.
 */
export async function encodeRequestResult(
  deps: ResultServiceDeps,
  req: { reqId: string; format: string; quality: number },
  signal?: AbortSignal,
): Promise<EncodedResult & { fps: number; fileName: string }> {
  if (req.reqId === '') throw invalidParameter('req_id', 'is required');
  if (req.quality > 100) throw invalidParameter('quality', `must be from 1 to 100 (0 = 90), got ${req.quality}`);
  const state = await deps.get(req.reqId);
  const ref = resultPixels(state);
  const [count, height, width, channels] = ref.shape;
  if (ref.shape.length !== 4 || channels !== 3 || ref.dtype !== 'uint8') {
    throw new DiffmeshError(Code.INTERNAL, 'INTERNAL', `unexpected result tensor ${ref.dtype}[${ref.shape.join(', ')}]`);
  }
  const format = resultFormatFor(count, req.format);
  const { data } = await deps.store.get(ref);
  const size = width * height * 3;
  const frames = Array.from({ length: count }, (_, f) => data.subarray(f * size, (f + 1) * size));
  const fps = state.context.params.fps;
  const encoded = await encodeResult({ width, height, frames }, format, {
    fps,
    ...(req.quality > 0 ? { quality: req.quality } : {}),
    ...(deps.ffmpegPath ? { ffmpegPath: deps.ffmpegPath } : {}),
    ...(signal ? { signal } : {}),
  });
  const ext = format === 'jpeg' ? 'jpg' : format;
  return { ...encoded, fps, fileName: `${req.reqId}.${ext}` };
}

/** Writes `msg`, waiting for the stream to drain when its buffer is full. */
async function write(
  call: grpc.ServerWritableStream<unknown, GetResultResponse>,
  msg: GetResultResponse,
  signal: AbortSignal,
): Promise<void> {
  if (call.write(msg)) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      call.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.on('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The `GetResult` handler: a header, then the encoded file in chunks of
 * {@link RESULT_CHUNK_BYTES}, with backpressure. A client that goes away stops the encoder.
 */
export function getResultHandler(deps: ResultServiceDeps): grpc.handleServerStreamingCall<GetResultRequest__Output, GetResultResponse> {
  return (call) => {
    const abort = new AbortController();
    call.on('cancelled', () => abort.abort());
    void (async () => {
      try {
        const out = await encodeRequestResult(deps, call.request, abort.signal);
        await write(
          call,
          {
            header: {
              mediaType: out.mediaType,
              format: out.format,
              sizeBytes: out.bytes.byteLength,
              width: out.width,
              height: out.height,
              frames: out.frames,
              fps: out.fps,
              fileName: out.fileName,
            },
          },
          abort.signal,
        );
        for (let at = 0; at < out.bytes.byteLength && !abort.signal.aborted; at += RESULT_CHUNK_BYTES) {
          await write(call, { chunk: out.bytes.subarray(at, at + RESULT_CHUNK_BYTES) }, abort.signal);
        }
        call.end();
      } catch (err) {
        if (abort.signal.aborted) return;
        deps.log.debug({ err, reqId: call.request.reqId }, 'GetResult failed');
        call.emit('error', toWire(err));
      }
    })();
  };
}
