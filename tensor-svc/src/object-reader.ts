/** Reading a stored object's bytes from its file. */
import type { FileHandle } from 'node:fs/promises';
import { Code, DiffmeshError, type ObjectRef } from '@diffmesh/core';
import type { ObjectSource } from './object-store.js';

/** An open object: positional reads from its file, whatever happens to the object meanwhile. */
export class ObjectReader implements ObjectSource {
  private closed = false;

  constructor(
    readonly ref: ObjectRef,
    private readonly fh: FileHandle,
    private readonly onClose: () => void,
  ) {}

  /**
   * Fills `buf[0, length)` from `position`. Throws DATA_LOSS when the file is shorter than the
   * object (truncated on disk).
   */
  async readExactly(buf: Uint8Array, length: number, position: number): Promise<void> {
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.fh.read(buf, done, length - done, position + done);
      if (bytesRead === 0) {
        throw new DiffmeshError(
          Code.DATA_LOSS,
          'CHECKSUM_MISMATCH',
          `object ${this.ref.objectId}: its file ends at ${position + done} of ${this.ref.sizeBytes} bytes`,
          { metadata: { object_id: this.ref.objectId } },
        );
      }
      done += bytesRead;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
    await this.fh.close().catch(() => undefined);
  }
}
