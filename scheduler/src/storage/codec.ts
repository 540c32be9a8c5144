import type { ObjectRef } from '@diffmesh/core';
import { DEFAULT_TENANT, type QueueItem, type RequestRecord } from './types.js';

/**
 * JSON for stored records and items. Bytes (an inline ObjectRef's `inlineData`) travel as
 * `{"$b64": "…"}`; everything else in a record is plain JSON (seeds are decimal strings).
 * Refs sit in known places (the context's refs, the result, the outputs of events), so the
 * conversion walks those only and the rest goes through the native JSON calls.
 */
export function encodeRecord(record: RequestRecord): string {
  if (!hasBytes(record)) return JSON.stringify(record);
  return JSON.stringify(mapRefs(record, toStored));
}

export function decodeRecord(text: string): RequestRecord {
  const record = JSON.parse(text) as RequestRecord;
  return text.includes('"$b64"') ? mapRefs(record, fromStored) : record;
}

/** A deep copy of a record (through its stored form). */
export function copyRecord(record: RequestRecord): RequestRecord {
  const copy = decodeRecord(encodeRecord(record));
  copy.revision = record.revision;
  return copy;
}

export function encodeItem(item: QueueItem): string {
  return JSON.stringify(item);
}

export function decodeItem(text: string): QueueItem {
  const item = JSON.parse(text) as QueueItem;
  // Items stored before tenants existed belong to the default tenant.
  item.tenant ??= DEFAULT_TENANT;
  return item;
}

type RefMap = Record<string, ObjectRef>;

/** Every map of refs in a record. */
function refMaps(record: RequestRecord): RefMap[] {
  const maps: RefMap[] = [record.state.context.refs, record.state.result, ...(record.checkpoint ? [record.checkpoint] : [])];
  for (const e of record.events) if (e.type === 'stage_finished' || e.type === 'completed') maps.push(e.outputs);
  return maps;
}

function hasBytes(record: RequestRecord): boolean {
  return refMaps(record).some((m) => Object.values(m).some((r) => r.inlineData !== undefined));
}

/** The record with each ref of each map replaced by `f(ref)` (maps are copied; the record's other parts are shared). */
function mapRefs(record: RequestRecord, f: (r: ObjectRef) => ObjectRef): RequestRecord {
  const map = (m: RefMap): RefMap => Object.fromEntries(Object.entries(m).map(([k, r]) => [k, f(r)]));
  return {
    ...record,
    state: {
      ...record.state,
      context: { ...record.state.context, refs: map(record.state.context.refs) },
      result: map(record.state.result),
    },
    events: record.events.map((e) => (e.type === 'stage_finished' || e.type === 'completed' ? { ...e, outputs: map(e.outputs) } : e)),
    ...(record.checkpoint ? { checkpoint: map(record.checkpoint) } : {}),
  };
}

function toStored(r: ObjectRef): ObjectRef {
  if (r.inlineData === undefined) return r;
  const b = r.inlineData;
  return { ...r, inlineData: { $b64: Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64') } as unknown as Uint8Array };
}

function fromStored(r: ObjectRef): ObjectRef {
  const stored = r.inlineData as unknown as { $b64?: string } | undefined;
  if (!stored || typeof stored.$b64 !== 'string') return r;
  const b = Buffer.from(stored.$b64, 'base64');
  return { ...r, inlineData: new Uint8Array(b.buffer, b.byteOffset, b.byteLength) };
}
