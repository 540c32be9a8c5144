/**
 * `multipart/form-data` bodies, read with busboy as they stream in, within limits: a file over
 * its limit is a 400 naming its field (the rest of the body is read and dropped, so the client
 * gets the answer), a body over the whole limit is a 413 at once.
 */
import type { IncomingMessage } from 'node:http';
import busboy from 'busboy';
import { Code, type DiffmeshError } from '@diffmesh/core';
import { bodyTooLarge, gatewayError } from './errors.js';
import { previewName } from './proto-json.js';

/** A file of a form. */
export interface UploadedFile {
  kind: 'file';
  /** The file name the client gave (may be empty). */
  filename: string;
  /** The part's Content-Type, as the client declared it (`application/octet-stream` when none). */
  mediaType: string;
  data: Buffer;
}

/** Whether a form value is a file. */
export function isUploadedFile(v: unknown): v is UploadedFile {
  return typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'file';
}

/** What a form may hold. */
export interface FormLimits {
  /** Largest body, files included (413 above it). */
  maxBodyBytes: number;
  /** Fields that may carry a file; a file in any other field is a 400 naming it. */
  fileFields: readonly string[];
  /** Largest file, in bytes: a larger one is a 400 naming its field. */
  maxFileBytes: number;
  /** Largest text value, in bytes. */
  maxFieldBytes: number;
  /** Most text fields. */
  maxFields: number;
}

function invalid(field: string, message: string): DiffmeshError {
  return gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', message, { field: previewName(field) });
}

/**
 * Reads a `multipart/form-data` body into its fields: text values as strings, files as
 * {@link UploadedFile}s. A field given twice, a file where a text value belongs, a value or a
 * file over its limit and too many fields are each a 400 naming the field; a malformed body
 * is a 400; a body over `maxBodyBytes` (declared or streamed) is a 413.
 */
export function readMultipart(req: IncomingMessage, limits: FormLimits): Promise<Record<string, string | UploadedFile>> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limits.maxBodyBytes) return Promise.reject(bodyTooLarge(limits.maxBodyBytes));
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: req.headers,
        defParamCharset: 'utf8',
        limits: {
          fileSize: limits.maxFileBytes,
          // One more of each than allowed, so that the extra one is seen and named.
          files: limits.fileFields.length + 1,
          fields: limits.maxFields + 1,
          fieldSize: limits.maxFieldBytes,
          fieldNameSize: 200,
        },
      });
    } catch (err) {
      reject(gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request body is not valid form data: ${(err as Error).message}`));
      return;
    }
    const values = new Map<string, string | UploadedFile>();
    let fields = 0;
    /** The first problem: the body is still read to its end (and dropped), then this is the answer. */
    let problem: Error | undefined;
    let settled = false;
    const fail = (err: Error): void => {
      problem ??= err;
    };
    const finish = (): void => {
      if (settled) return;
      settled = true;
      if (problem) reject(problem);
      else resolve(Object.fromEntries(values)); // own properties, `__proto__` included
    };
    const add = (name: string, value: string | UploadedFile): void => {
      if (values.has(name))
        fail(invalid(name, name.endsWith('[]') ? 'takes one value here (one image is supported)' : 'is given more than once'));
      else values.set(name, value);
    };

    // busboy reports a part without `name=` in its Content-Disposition with an undefined name:
    // a 400, not a TypeError thrown out of its event (which would leave the request unanswered).
    const unnamed = (name: string | undefined): boolean => {
      if (typeof name === 'string' && name !== '') return false;
      fail(invalid('form', 'a part has no name (expected Content-Disposition: form-data; name="…")'));
      return true;
    };

    parser.on('field', (name, value, info) => {
      if (problem || unnamed(name)) return;
      fields += 1;
      if (info.nameTruncated) fail(invalid(name, 'field name is too long'));
      else if (fields > limits.maxFields) fail(invalid(name, `too many form fields (at most ${limits.maxFields})`));
      else if (info.valueTruncated) fail(invalid(name, `is longer than the limit of ${limits.maxFieldBytes} bytes`));
      else add(name, value);
    });
    parser.on('file', (name, stream, info) => {
      // A form that ends inside a file destroys the file's stream with busboy's error: without
      // a listener that is an uncaught exception. The parser reports the same error (below).
      stream.on('error', (err: Error) =>
        fail(gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request body is not valid form data: ${err.message}`)),
      );
      if (problem || unnamed(name)) {
        stream.resume();
        return;
      }
      if (!limits.fileFields.includes(name)) {
        fail(
          limits.fileFields.length === 0
            ? invalid(name, 'expected a text value, got a file (this route takes no file)')
            : invalid(name, `expected a text value, got a file (files go in ${limits.fileFields.join(', ')})`),
        );
        stream.resume();
        return;
      }
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => {
        if (!problem) chunks.push(chunk);
      });
      stream.on('limit', () => {
        fail(invalid(name, `is larger than the limit of ${limits.maxFileBytes} bytes`));
        chunks.length = 0;
      });
      stream.on('end', () => {
        if (problem || stream.truncated) return;
        add(name, {
          kind: 'file',
          filename: info.filename ?? '',
          mediaType: info.mimeType || 'application/octet-stream',
          data: Buffer.concat(chunks),
        });
      });
    });
    parser.on('filesLimit', () => fail(invalid(limits.fileFields[0] ?? 'file', `too many files (at most ${limits.fileFields.length})`)));
    parser.on('error', (err: Error) => {
      fail(gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', `request body is not valid form data: ${err.message}`));
      // Stop parsing; read the rest of the body and drop it, then answer.
      req.unpipe(parser);
      req.resume();
      if (req.readableEnded) finish();
      else req.once('end', finish);
    });
    parser.on('close', finish);

    let total = 0;
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > limits.maxBodyBytes && !settled) {
        // Answer now; keep reading (and dropping) the body so that the 413 reaches the client.
        req.unpipe(parser);
        req.resume();
        problem = bodyTooLarge(limits.maxBodyBytes);
        finish();
      }
    });
    req.once('close', () => {
      if (!req.readableEnded && !settled) {
        problem = gatewayError(Code.CANCELLED, 'CANCELLED', 'the client went away while sending the body');
        finish();
      }
    });
    req.pipe(parser);
  });
}
