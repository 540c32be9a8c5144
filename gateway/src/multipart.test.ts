import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DiffmeshError } from '@diffmesh/core';
import { readMultipart } from './multipart.js';

// readMultipart against a real HTTP server: each body gets an answer, never an exception out
// of busboy's events (which left the request unanswered and crashed the process).

let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    readMultipart(req, { maxBodyBytes: 1 << 20, fileFields: ['image'], maxFileBytes: 1 << 16, maxFieldBytes: 1024, maxFields: 8 }).then(
      (values) => res.end(JSON.stringify({ fields: Object.keys(values) })),
      (err: DiffmeshError) => {
        res.statusCode = 400;
        res.end(JSON.stringify({ message: err.message, field: err.field }));
      },
    );
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

const B = 'b0undary';
const post = async (body: string) => {
  const res = await fetch(base, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${B}` }, body });
  return { status: res.status, body: (await res.json()) as { message?: string; field?: string; fields?: string[] } };
};

describe('readMultipart', () => {
  it('answers a part without a name with a 400 naming the form (found by the fuzz suite: it threw out of busboy)', async () => {
    const text = await post(`--${B}\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n--${B}--\r\n`);
    expect(text).toEqual({ status: 400, body: { message: expect.stringContaining('a part has no name'), field: 'form' } });
    const file = await post(
      `--${B}\r\nContent-Disposition: form-data; filename="a.png"\r\nContent-Type: image/png\r\n\r\nxx\r\n--${B}--\r\n`,
    );
    expect(file.status).toBe(400);
    expect(file.body.field).toBe('form');
    // Without its closing boundary too.
    expect((await post(`--${B}\r\nContent-Disposition: form-data\r\n\r\nvalue\r\n`)).status).toBe(400);
  });

  it('answers a form that ends inside a file with a 400 (found by the fuzz suite: an uncaught error on the file stream)', async () => {
    for (const name of ['image', 'prompt', '']) {
      const cut = await post(
        `--${B}\r\nContent-Disposition: form-data; name="${name}"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG`,
      );
      expect(cut.status, name).toBe(400);
      expect(cut.body.message, name).toBeTruthy();
    }
  });

  it('still reads named fields and files', async () => {
    const ok = await post(
      `--${B}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nhi\r\n--${B}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\nxx\r\n--${B}--\r\n`,
    );
    expect(ok).toEqual({ status: 200, body: { fields: ['prompt', 'image'] } });
  });
});
