/**
 * Input images of the OpenAI-compatible endpoints (`/v1/images/edits`' `image`, `/v1/videos`'
 * `input_reference`): a file uploaded as multipart/form-data, or a base64 `data:` URL. Each is
 * checked here, decoded whole (a corrupt, truncated, oversized or foreign image is a 400 naming
 * the parameter), before it goes to the scheduler, which probes it again and stores it for the
 * stage that takes it.
 */
import { Code, type DiffmeshError, type InputImageSource } from '@diffmesh/core';
import { verifyImage } from '@diffmesh/media';
import { gatewayError } from './errors.js';
import { base64Length } from './http-util.js';
import { isUploadedFile } from './multipart.js';
import { describeValue } from './proto-json.js';

function invalid(param: string, message: string): DiffmeshError {
  return gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', message, { field: param });
}

const DATA_URL = /^data:([^,;]*)((?:;[^,;]*)*),/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** The bytes of a base64 `data:` URL (at most `maxBytes` of them), naming `param` when it is not one. */
function dataUrlBytes(url: string, param: string, maxBytes: number): Buffer {
  const m = DATA_URL.exec(url.slice(0, 512));
  if (!m) {
    if (/^https?:\/\//i.test(url)) {
      throw invalid(param, 'image URLs are not fetched; upload the file (multipart/form-data) or give a base64 data: URL');
    }
    throw invalid(param, `expected an image file or a base64 data: URL such as "data:image/png;base64,…", got ${describeValue(url)}`);
  }
  if (!m[2].toLowerCase().split(';').includes('base64')) throw invalid(param, 'a data: URL must be base64 ("data:image/png;base64,…")');
  const payload = url.slice(m[0].length).replace(/\s+/g, '');
  if (payload.length > base64Length(maxBytes)) throw invalid(param, `is larger than the limit of ${maxBytes} bytes`);
  if (!BASE64.test(payload)) throw invalid(param, 'the data: URL is not valid base64');
  return Buffer.from(payload, payload.includes('-') || payload.includes('_') ? 'base64url' : 'base64');
}

/**
 * An input image given as `value` for parameter `param`: an uploaded file, a base64 `data:`
 * URL, or OpenAI's `{ image_url }` reference with such a URL (`file_id` references are not
 * supported). Throws a 400 naming `param` for anything else, and for an image that is empty,
 * larger than `maxBytes`, corrupt, animated, too large in pixels, or not PNG, JPEG or WebP.
 */
export async function inputImageParam(value: unknown, param: string, maxBytes: number): Promise<InputImageSource> {
  let data: Buffer;
  if (isUploadedFile(value)) data = value.data;
  else if (typeof value === 'string') data = dataUrlBytes(value, param, maxBytes);
  else if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
    const ref = value as Record<string, unknown>;
    if (ref.file_id !== undefined) throw invalid(param, 'file_id references are not supported; upload the file or give image_url');
    if (typeof ref.image_url !== 'string') throw invalid(param, 'expected { "image_url": "data:image/…;base64,…" }');
    data = dataUrlBytes(ref.image_url, param, maxBytes);
  } else {
    throw invalid(param, `expected an image file (multipart/form-data) or a base64 data: URL, got ${describeValue(value)}`);
  }
  if (data.byteLength > maxBytes) throw invalid(param, `is larger than the limit of ${maxBytes} bytes`);
  const info = await verifyImage(data, param);
  return { kind: 'data', data, mediaType: info.mediaType };
}
