// Surface: input images gone wrong, through every way one enters the mesh: OpenAI's image
// edits (multipart and JSON data URL), video jobs' input_reference, /api/v1's
// params.inputImage.data (checked by the scheduler) and the scheduler's Submit over gRPC.
// Images are truncated PNG, JPEG and WebP files, files with bytes flipped, headers that
// declare 50,000×50,000 pixels, foreign formats and random bytes: each must be a 400 /
// INVALID_ARGUMENT naming the image's field, without decoding (or allocating) what the
// header claims.
import { crc32 } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { fromWire, paramsToWire, type DiffmeshError } from '@diffmesh/core';
import { encodeImage, encodePng } from '@diffmesh/media';
import { CALL_DEADLINE_MS, wrongGrpcAnswer } from './checks.js';
import { forEachInput } from './generators.js';
import { FUZZ_KEY, FUZZ_MODEL, type FuzzMesh } from './mesh.js';
import type { FuzzReport } from './report.js';

const SIZE = 16;

/** Valid images to break: a 16×16 PNG, JPEG and WebP of the same pixels. */
async function baseImages(): Promise<Record<'png' | 'jpeg' | 'webp', Buffer>> {
  const data = new Uint8Array(SIZE * SIZE * 3).map((_, i) => (i * 37) & 0xff);
  const image = { data, width: SIZE, height: SIZE };
  return {
    png: Buffer.from(encodePng(data, SIZE, SIZE)),
    jpeg: await encodeImage(image, 'jpeg'),
    webp: await encodeImage(image, 'webp'),
  };
}

function pngChunk(type: string, body: Buffer): Buffer {
  const head = Buffer.from(type, 'latin1');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head, body])));
  return Buffer.concat([len, head, body, crc]);
}

/** A PNG whose header declares `w`×`h` (valid CRCs), with a few bytes of image data. */
function hugePng(w: number, h: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', Buffer.from([0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A baseline JPEG whose frame header (SOF0) declares `w`×`h`. */
function hugeJpeg(base: Buffer, w: number, h: number): Buffer {
  const out = Buffer.from(base);
  for (let i = 2; i + 9 < out.length; i += 1) {
    if (out[i] === 0xff && (out[i + 1] === 0xc0 || out[i + 1] === 0xc2)) {
      out.writeUInt16BE(h, i + 5);
      out.writeUInt16BE(w, i + 7);
      return out;
    }
  }
  return out;
}

type Kind = 'truncated' | 'flipped' | 'huge-header' | 'random' | 'empty' | 'foreign';
const ROUTES = ['edits multipart', 'edits json', 'videos multipart', 'api/v1 requests', 'grpc Submit'] as const;
type Route = (typeof ROUTES)[number];

interface ImageInput {
  kind: Kind;
  format: string;
  route: Route;
  bytes: Buffer;
}

function imageInput(base: Record<'png' | 'jpeg' | 'webp', Buffer>): fc.Arbitrary<ImageInput> {
  const format = fc.constantFrom<'png' | 'jpeg' | 'webp'>('png', 'jpeg', 'webp');
  const bytes: fc.Arbitrary<Omit<ImageInput, 'route'>> = fc.oneof<Array<fc.Arbitrary<Omit<ImageInput, 'route'>>>>(
    fc.tuple(format, fc.nat()).map(([f, n]) => {
      // At least the last 13 bytes go (PNG's IEND chunk, JPEG's end marker): the image is cut.
      const b = base[f];
      return { kind: 'truncated', format: f, bytes: b.subarray(0, n % Math.max(1, b.length - 13)) };
    }),
    fc.tuple(format, fc.array(fc.tuple(fc.nat(), fc.integer({ min: 1, max: 255 })), { minLength: 1, maxLength: 6 })).map(([f, flips]) => {
      const b = Buffer.from(base[f]);
      // Past the signature, so that the format is still recognised and the decoder meets the damage.
      for (const [at, x] of flips) b[8 + (at % (b.length - 8))] ^= x;
      return { kind: 'flipped', format: f, bytes: b };
    }),
    fc
      .tuple(fc.constantFrom('png', 'jpeg'), fc.integer({ min: 8193, max: 65535 }), fc.integer({ min: 8193, max: 65535 }))
      .map(([f, w, h]) => ({
        kind: 'huge-header',
        format: f,
        bytes: f === 'png' ? hugePng(Math.max(w, 50_000), Math.max(h, 50_000)) : hugeJpeg(base.jpeg, w, h),
      })),
    fc.uint8Array({ minLength: 1, maxLength: 2000 }).map((b) => ({ kind: 'random', format: 'none', bytes: Buffer.from(b) })),
    fc.constant({ kind: 'empty', format: 'none', bytes: Buffer.alloc(0) }),
    fc
      .constantFrom(
        Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1'),
        Buffer.from('BM\x00\x00', 'latin1'),
        Buffer.from('<svg/>'),
      )
      .map((b) => ({
        kind: 'foreign',
        format: 'foreign',
        bytes: b,
      })),
  );
  return fc.tuple(bytes, fc.constantFrom(...ROUTES)).map(([b, route]): ImageInput => ({ ...b, route }));
}

const BOUNDARY = 'fuzzimage9xQ2';

function multipart(fields: Record<string, string>, file: { name: string; bytes: Buffer; type: string }): Buffer {
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields))
    parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  parts.push(
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${file.name}"; filename="in.img"\r\nContent-Type: ${file.type}\r\n\r\n`,
    ),
    file.bytes,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  );
  return Buffer.concat(parts);
}

/** The answer: an HTTP status and the field its error names, or a gRPC error. */
interface Answer {
  kind: string;
  field?: string;
  message?: string;
  grpcError?: DiffmeshError;
}

async function http(mesh: FuzzMesh, path: string, body: Buffer | string, type: string): Promise<Answer> {
  const res = await fetch(mesh.gateway.address + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': type },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  let err: { field?: string; param?: string | null; message?: string } | undefined;
  try {
    err = (JSON.parse(text) as { error?: typeof err }).error;
  } catch {
    err = undefined;
  }
  const field = err?.field ?? err?.param ?? undefined;
  return { kind: String(res.status), ...(field ? { field } : {}), ...(err?.message ? { message: err.message } : {}) };
}

async function send(mesh: FuzzMesh, input: ImageInput): Promise<Answer> {
  const b64 = input.bytes.toString('base64');
  const type = input.format === 'jpeg' ? 'image/jpeg' : input.format === 'webp' ? 'image/webp' : 'image/png';
  switch (input.route) {
    case 'edits multipart':
      return http(
        mesh,
        '/v1/images/edits',
        multipart({ prompt: 'a cat' }, { name: 'image', bytes: input.bytes, type }),
        `multipart/form-data; boundary=${BOUNDARY}`,
      );
    case 'edits json':
      return http(
        mesh,
        '/v1/images/edits',
        JSON.stringify({ prompt: 'a cat', images: [{ image_url: `data:${type};base64,${b64}` }] }),
        'application/json',
      );
    case 'videos multipart':
      return http(
        mesh,
        '/v1/videos',
        multipart(
          { prompt: 'a cat', model: FUZZ_MODEL, num_frames: '2', size: '64x64' },
          { name: 'input_reference', bytes: input.bytes, type },
        ),
        `multipart/form-data; boundary=${BOUNDARY}`,
      );
    case 'api/v1 requests':
      return http(
        mesh,
        '/api/v1/requests',
        JSON.stringify({
          model: FUZZ_MODEL,
          params: { prompt: 'a cat', width: 64, height: 64, numInferenceSteps: 2, inputImage: { data: b64 } },
        }),
        'application/json',
      );
    case 'grpc Submit':
      return new Promise((resolve) => {
        const params = {
          ...paramsToWire({ prompt: 'a cat', width: 64, height: 64, numInferenceSteps: 2 }),
          inputImage: { data: input.bytes },
        };
        (mesh.client.Submit as (req: unknown, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null) => void) => void).call(
          mesh.client,
          { model: FUZZ_MODEL, params },
          { deadline: Date.now() + CALL_DEADLINE_MS },
          (err) => {
            const e = err ? fromWire(err) : undefined;
            resolve({
              kind: e ? grpc.status[e.code] : 'OK',
              ...(e?.field ? { field: e.field } : {}),
              ...(e ? { grpcError: e, message: e.message } : {}),
            });
          },
        );
      });
  }
}

/** The field an image is refused by, on each route. */
const IMAGE_FIELDS: Record<Route, RegExp> = {
  'edits multipart': /^image$/,
  'edits json': /^images/,
  'videos multipart': /^input_reference$/,
  'api/v1 requests': /input_?[iI]mage/,
  'grpc Submit': /input_image/,
};

export async function fuzzImages(mesh: FuzzMesh, report: FuzzReport): Promise<void> {
  const surface = 'images';
  const base = await baseImages();
  await forEachInput('images', imageInput(base), async (input) => {
    const answer = await send(mesh, input);
    report.record(surface, { made: `${input.kind} ${input.format}`, target: input.route }, answer.kind);
    const what = `${input.route}: ${input.kind} ${input.format} image of ${input.bytes.length} bytes (${input.bytes.subarray(0, 24).toString('hex')})`;
    let wrong: string | undefined;
    if (answer.grpcError) wrong = wrongGrpcAnswer(answer.grpcError);
    else if (Number(answer.kind) >= 500) wrong = `answered ${answer.kind}: ${answer.message ?? ''}`;
    // A refusal must name the image's field (or, on the edits route, the model: tiny-shapes does no img2img, which is checked after the image).
    const refused = answer.kind === '400' || answer.kind === 'INVALID_ARGUMENT';
    if (
      !wrong &&
      refused &&
      !IMAGE_FIELDS[input.route].test(answer.field ?? '') &&
      !(input.route.startsWith('edits') && answer.field === 'model')
    ) {
      wrong = `refused naming ${answer.field ?? 'no field'}: ${answer.message ?? ''}`;
    }
    // Nothing broken gets through to a running request: a huge header, an empty or foreign file never does.
    if (!wrong && !refused && ['huge-header', 'empty', 'foreign'].includes(input.kind)) wrong = `accepted (${answer.kind})`;
    if (wrong) {
      report.fail(surface, `${what}: ${wrong}`);
      throw new Error(`${what}: ${wrong}`);
    }
  });
}
