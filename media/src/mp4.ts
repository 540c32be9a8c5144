/** What the ISO BMFF boxes of an MP4 say about its first video track. */
export interface Mp4Info {
  /** Sample count of the video track (one sample per frame); 0 for a fragmented file. */
  frames: number;
  width: number;
  height: number;
}

interface Box {
  type: string;
  start: number; // payload start
  end: number;
}

function* boxes(view: DataView, start: number, end: number): Generator<Box> {
  let pos = start;
  while (pos + 8 <= end) {
    let size = view.getUint32(pos);
    const type = String.fromCharCode(view.getUint8(pos + 4), view.getUint8(pos + 5), view.getUint8(pos + 6), view.getUint8(pos + 7));
    let header = 8;
    if (size === 1) {
      if (pos + 16 > end) return;
      size = Number(view.getBigUint64(pos + 8));
      header = 16;
    } else if (size === 0) {
      size = end - pos;
    }
    if (size < header || pos + size > end) return;
    yield { type, start: pos + header, end: pos + size };
    pos += size;
  }
}

function child(view: DataView, parent: Box, type: string): Box | undefined {
  for (const box of boxes(view, parent.start, parent.end)) if (box.type === type) return box;
  return undefined;
}

export function isMp4(bytes: Uint8Array): boolean {
  return bytes.length >= 12 && String.fromCharCode(...bytes.subarray(4, 8)) === 'ftyp';
}

/** Reads frame count and size from the moov box; undefined when there is no video track. */
export function mp4Info(bytes: Uint8Array): Mp4Info | undefined {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const root: Box = { type: '', start: 0, end: bytes.length };
  const moov = child(view, root, 'moov');
  if (!moov) return undefined;
  for (const trak of boxes(view, moov.start, moov.end)) {
    if (trak.type !== 'trak') continue;
    const mdia = child(view, trak, 'mdia');
    const hdlr = mdia && child(view, mdia, 'hdlr');
    // hdlr payload: version/flags (4), pre_defined (4), handler_type (4).
    if (!hdlr || hdlr.end - hdlr.start < 12) continue;
    if (String.fromCharCode(...bytes.subarray(hdlr.start + 8, hdlr.start + 12)) !== 'vide') continue;
    const tkhd = child(view, trak, 'tkhd');
    const minf = child(view, mdia, 'minf');
    const stbl = minf && child(view, minf, 'stbl');
    const stsz = stbl && child(view, stbl, 'stsz');
    // tkhd ends with width and height as 16.16 fixed point; stsz: version/flags, sample_size, sample_count.
    const width = tkhd && tkhd.end - tkhd.start >= 8 ? view.getUint32(tkhd.end - 8) >>> 16 : 0;
    const height = tkhd && tkhd.end - tkhd.start >= 8 ? view.getUint32(tkhd.end - 4) >>> 16 : 0;
    const frames = stsz && stsz.end - stsz.start >= 12 ? view.getUint32(stsz.start + 8) : 0;
    return { frames, width, height };
  }
  return undefined;
}
