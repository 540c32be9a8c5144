import type { StoreUsage } from './store.js';

/** RPCs of TensorService. */
export const TENSOR_METHODS = ['Put', 'Get', 'Stat', 'Delete', 'Touch'] as const;
export type TensorMethod = (typeof TENSOR_METHODS)[number];

/** A point-in-time copy of {@link TensorMetrics}. */
export interface TensorMetricsSnapshot {
  /** Calls started, by method. */
  calls: Record<TensorMethod, number>;
  /** Calls that ended with an error status, by method. */
  errors: Record<TensorMethod, number>;
  /**
   * Object bytes the service holds in its heap for streams right now: Get chunks read from
   * storage and not yet flushed to the socket, and Put chunks received and not yet written
   * to their file.
   */
  streamBufferedBytes: number;
  /** The highest {@link streamBufferedBytes} seen since start. */
  streamBufferedBytesMax: number;
  /** Object bytes sent by Get streams (flushed to the transport). */
  getBytes: number;
  /** Object bytes stored by Put streams. */
  putBytes: number;
  /** Streams open now. */
  openStreams: number;
}

function perMethod(): Record<TensorMethod, number> {
  return { Put: 0, Get: 0, Stat: 0, Delete: 0, Touch: 0 };
}

/** Counters of one tensor-svc. */
export class TensorMetrics {
  private readonly calls = perMethod();
  private readonly errors = perMethod();
  private buffered = 0;
  private bufferedMax = 0;
  private getBytes = 0;
  private putBytes = 0;
  private streams = 0;

  call(method: TensorMethod): void {
    this.calls[method] += 1;
  }

  error(method: TensorMethod): void {
    this.errors[method] += 1;
  }

  /** +n when stream bytes enter the heap, −n when they leave it. */
  buffer(delta: number): void {
    this.buffered += delta;
    if (this.buffered > this.bufferedMax) this.bufferedMax = this.buffered;
  }

  sent(bytes: number): void {
    this.getBytes += bytes;
  }

  stored(bytes: number): void {
    this.putBytes += bytes;
  }

  streamOpened(): void {
    this.streams += 1;
  }

  streamClosed(): void {
    this.streams -= 1;
  }

  /** Resets the high-water mark of buffered bytes (so a test or operator can measure a window). */
  resetBufferedMax(): void {
    this.bufferedMax = this.buffered;
  }

  snapshot(): TensorMetricsSnapshot {
    return {
      calls: { ...this.calls },
      errors: { ...this.errors },
      streamBufferedBytes: this.buffered,
      streamBufferedBytesMax: this.bufferedMax,
      getBytes: this.getBytes,
      putBytes: this.putBytes,
      openStreams: this.streams,
    };
  }

  /** The Prometheus text exposition of these counters, the store's usage and the process's memory. */
  render(usage: StoreUsage, labels: Record<string, string>): string {
    const s = this.snapshot();
    const base = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`);
    const lbl = (extra: Record<string, string> = {}): string => {
      const all = [...base, ...Object.entries(extra).map(([k, v]) => `${k}="${escapeLabel(v)}"`)];
      return all.length > 0 ? `{${all.join(',')}}` : '';
    };
    const mem = process.memoryUsage();
    const lines: string[] = [];
    const metric = (name: string, type: 'counter' | 'gauge', help: string, samples: [Record<string, string>, number][]): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [extra, value] of samples) lines.push(`${name}${lbl(extra)} ${value}`);
    };
    metric(
      'diffmesh_tensor_calls_total',
      'counter',
      'TensorService calls started.',
      TENSOR_METHODS.map((m) => [{ method: m }, s.calls[m]]),
    );
    metric(
      'diffmesh_tensor_call_errors_total',
      'counter',
      'TensorService calls that ended with an error status.',
      TENSOR_METHODS.map((m) => [{ method: m }, s.errors[m]]),
    );
    metric(
      'diffmesh_tensor_stream_buffered_bytes',
      'gauge',
      'Object bytes held in the heap for streams (read and not yet flushed, or received and not yet written).',
      [[{}, s.streamBufferedBytes]],
    );
    metric('diffmesh_tensor_stream_buffered_max_bytes', 'gauge', 'Highest diffmesh_tensor_stream_buffered_bytes since start.', [
      [{}, s.streamBufferedBytesMax],
    ]);
    metric('diffmesh_tensor_open_streams', 'gauge', 'Put and Get streams open.', [[{}, s.openStreams]]);
    metric('diffmesh_tensor_get_sent_bytes_total', 'counter', 'Object bytes sent by Get streams.', [[{}, s.getBytes]]);
    metric('diffmesh_tensor_put_stored_bytes_total', 'counter', 'Object bytes stored by Put streams.', [[{}, s.putBytes]]);
    metric('diffmesh_tensor_objects', 'gauge', 'Objects stored, by tier.', [
      [{ tier: 'memory' }, usage.memory.objects],
      [{ tier: 'disk' }, usage.disk.objects],
      ...(usage.durable ? [[{ tier: 'durable' }, usage.durable.objects] as [Record<string, string>, number]] : []),
    ]);
    metric('diffmesh_tensor_stored_bytes', 'gauge', 'Object bytes stored, by tier.', [
      [{ tier: 'memory' }, usage.memory.bytes],
      [{ tier: 'disk' }, usage.disk.bytes],
      ...(usage.durable ? [[{ tier: 'durable' }, usage.durable.bytes] as [Record<string, string>, number]] : []),
    ]);
    metric('diffmesh_tensor_reserved_bytes', 'gauge', 'Bytes reserved by puts in progress, by tier.', [
      [{ tier: 'memory' }, usage.memory.reservedBytes],
      [{ tier: 'disk' }, usage.disk.reservedBytes],
    ]);
    metric('diffmesh_tensor_capacity_bytes', 'gauge', 'Capacity, by tier.', [
      [{ tier: 'memory' }, usage.memory.capacityBytes],
      [{ tier: 'disk' }, usage.disk.capacityBytes],
      ...(usage.durable ? [[{ tier: 'durable' }, usage.durable.capacityBytes] as [Record<string, string>, number]] : []),
    ]);
    metric('diffmesh_tensor_spill_threshold_bytes', 'gauge', 'Shared-memory use past which new objects spill to disk.', [
      [{}, usage.memory.spillThresholdBytes],
    ]);
    metric(
      'diffmesh_tensor_process_array_buffers_bytes',
      'gauge',
      'process.memoryUsage().arrayBuffers: Buffer memory of the process, garbage not yet collected included.',
      [[{}, mem.arrayBuffers]],
    );
    metric('diffmesh_tensor_process_resident_memory_bytes', 'gauge', 'Resident set size of the process.', [[{}, mem.rss]]);
    return `${lines.join('\n')}\n`;
  }
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

/** Reads one sample (`name{labels} value`) from a Prometheus text page; undefined when absent. */
export function readMetric(page: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of page.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = m[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) return Number(m[3]);
  }
  return undefined;
}
