/**
 * A byte-bounded LRU of loaded adapters: an entry is dropped, least recently used first, when
 * the entries together pass `maxBytes`. An entry larger than the whole bound is not kept.
 */
export class AdapterCache<V extends { bytes: number }> {
  private readonly entries = new Map<string, V>();
  private total = 0;

  constructor(readonly maxBytes: number) {}

  get(key: string): V | undefined {
    const v = this.entries.get(key);
    if (v === undefined) return undefined;
    // Re-insert: Map order is the recency order.
    this.entries.delete(key);
    this.entries.set(key, v);
    return v;
  }

  set(key: string, value: V): void {
    this.delete(key);
    if (value.bytes > this.maxBytes) return;
    this.entries.set(key, value);
    this.total += value.bytes;
    for (const [k, v] of this.entries) {
      if (this.total <= this.maxBytes) break;
      this.entries.delete(k);
      this.total -= v.bytes;
    }
  }

  delete(key: string): void {
    const v = this.entries.get(key);
    if (v === undefined) return;
    this.entries.delete(key);
    this.total -= v.bytes;
  }

  /** Bytes the kept entries hold. */
  get bytes(): number {
    return this.total;
  }

  keys(): string[] {
    return [...this.entries.keys()];
  }
}
