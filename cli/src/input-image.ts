import { readFile, stat } from 'node:fs/promises';
import { DiffmeshError, invalidParameter, type InputImageSource } from '@diffmesh/core/client';

/**
 * Reads the file of `--image` and checks it is a whole image the scheduler takes (PNG, JPEG
 * or WebP, one frame, at most media's `MAX_INPUT_IMAGE_BYTES`; decoded once to find truncated or
 * corrupt data), so that a bad file is refused before any work, naming the field
 * `input_image` (the flag `--image`) and the file.
 */
export async function readInputImage(file: string): Promise<InputImageSource> {
  // The image codecs load only for a command given an image.
  const { MAX_INPUT_IMAGE_BYTES, verifyImage } = await import('@diffmesh/media');
  let size: number;
  try {
    const info = await stat(file);
    if (!info.isFile()) throw invalidParameter('input_image', `"${file}" is not a file`);
    size = info.size;
  } catch (err) {
    if (err instanceof DiffmeshError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw invalidParameter(
      'input_image',
      code === 'ENOENT' ? `"${file}" does not exist` : `cannot read "${file}" (${code ?? String(err)})`,
    );
  }
  // Refused by size before it is read: an oversized file is never loaded.
  if (size > MAX_INPUT_IMAGE_BYTES) {
    throw invalidParameter('input_image', `"${file}" is ${size} bytes; at most ${MAX_INPUT_IMAGE_BYTES} are accepted`);
  }
  let data: Buffer;
  try {
    data = await readFile(file);
  } catch (err) {
    throw invalidParameter('input_image', `cannot read "${file}" (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  try {
    const { mediaType } = await verifyImage(data, 'input_image');
    return { kind: 'data', data, mediaType };
  } catch (err) {
    // "input_image: is not a readable …" → "input_image: "photo.txt" is not a readable …"
    if (err instanceof DiffmeshError && err.field === 'input_image') {
      throw invalidParameter('input_image', `"${file}" ${err.message.replace(/^input_image: /, '')}`);
    }
    throw err;
  }
}
