// Types for the parts of gifenc 1.0.3 that diffmesh uses (the package ships none). Only
// types are declared: gif.ts loads the module with require() (see there).
declare module 'gifenc' {
  /** `[r, g, b]` (or `[r, g, b, a]` for the rgba4444 format). */
  type Color = number[];
  type Format = 'rgb565' | 'rgb444' | 'rgba4444';

  interface WriteFrameOptions {
    palette?: Color[];
    /** Milliseconds; stored rounded to centiseconds. */
    delay?: number;
    /** -1 = play once, 0 = forever, n = n extra plays. Read on the first frame only. */
    repeat?: number;
    transparent?: boolean;
    transparentIndex?: number;
    dispose?: number;
    first?: boolean;
  }

  interface Encoder {
    writeFrame(index: Uint8Array, width: number, height: number, opts?: WriteFrameOptions): void;
    finish(): void;
    /** A copy of the bytes written so far. */
    bytes(): Uint8Array;
    bytesView(): Uint8Array;
    reset(): void;
  }

  /** `module.exports` of gifenc. */
  export interface Gifenc {
    GIFEncoder(opts?: { auto?: boolean; initialCapacity?: number }): Encoder;
    /** `rgba` must be RGBA and own its whole ArrayBuffer (gifenc views `rgba.buffer` as Uint32). */
    quantize(rgba: Uint8Array, maxColors: number, opts?: { format?: Format }): Color[];
    applyPalette(rgba: Uint8Array, palette: Color[], format?: Format): Uint8Array;
  }
}
