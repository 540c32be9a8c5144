import { describe, expect, it } from 'vitest';
import { ConfigError } from '../config/index.js';
import { Code, DiffmeshError } from '../errors/index.js';
import { MemoryTaskQueue, createTaskQueue, type TaskQueue } from './index.js';

function queue<T = string>(maxLength = 10_000, now?: () => number): TaskQueue<T> {
  return createTaskQueue<T>({ backend: 'memory', maxLength }, { name: 'dit-tiny', now });
}

function drain<T>(q: TaskQueue<T>): T[] {
  const out: T[] = [];
  while (q.size > 0) out.push(q.dequeue() as T);
  return out;
}

function thrown(fn: () => unknown): DiffmeshError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DiffmeshError);
    return err as DiffmeshError;
  }
  throw new Error('expected a DiffmeshError');
}

async function rejection(p: Promise<unknown>): Promise<DiffmeshError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DiffmeshError);
  return err as DiffmeshError;
}

describe('ordering', () => {
  it('hands out larger priorities first', () => {
    const q = queue();
    q.enqueue('low', { id: 'a', priority: -1 });
    q.enqueue('normal', { id: 'b' });
    q.enqueue('high', { id: 'c', priority: 10 });
    q.enqueue('mid', { id: 'd', priority: 5 });
    expect(drain(q)).toEqual(['high', 'mid', 'normal', 'low']);
    expect(q.dequeue()).toBeUndefined();
  });

  it('is FIFO within a priority over 1,000 interleaved items', () => {
    const q = queue<{ p: number; n: number }>();
    const priorities = [0, 3, 1, 3, 2, 0, 1];
    for (let n = 0; n < 1000; n++) {
      const p = priorities[(n * 7 + (n >> 3)) % priorities.length];
      q.enqueue({ p, n }, { id: `t${n}`, priority: p });
    }
    // Remove some from the middle so the heap is reshaped, as cancellations do.
    for (let n = 5; n < 1000; n += 97) q.remove(`t${n}`);
    const out = drain(q);
    expect(out).toHaveLength(1000 - 11);
    for (let i = 1; i < out.length; i++) {
      const [a, b] = [out[i - 1], out[i]];
      expect(a.p > b.p || (a.p === b.p && a.n < b.n)).toBe(true);
    }
  });

  it('rejects a duplicate id and a non-finite priority', () => {
    const q = queue();
    q.enqueue('x', { id: 'a' });
    expect(() => q.enqueue('y', { id: 'a' })).toThrow(/"a" is already queued/);
    expect(thrown(() => q.enqueue('y', { id: 'b', priority: Number.NaN })).field).toBe('priority');
    expect(q.size).toBe(1);
  });
});

describe('take', () => {
  it('returns a queued item at once', async () => {
    const q = queue();
    q.enqueue('x', { id: 'a' });
    expect(await q.take()).toBe('x');
  });

  it('waits for an enqueue and serves waiters in call order', async () => {
    const q = queue();
    const first = q.take();
    const second = q.take();
    q.enqueue('one', { id: 'a' });
    q.enqueue('two', { id: 'b' });
    expect(await first).toBe('one');
    expect(await second).toBe('two');
    expect(q.size).toBe(0);
  });

  it('rejects with CANCELLED when its signal aborts, and the next item stays queued', async () => {
    const q = queue();
    const ac = new AbortController();
    const aborted = q.take(ac.signal);
    ac.abort();
    const err = await rejection(aborted);
    expect(err.code).toBe(Code.CANCELLED);
    expect(err.reason).toBe('CANCELLED');
    q.enqueue('x', { id: 'a' });
    expect(q.size).toBe(1);
    expect(await q.take()).toBe('x');
  });

  it('rejects at once on an already aborted signal, with TIMEOUT for a timeout', async () => {
    const q = queue();
    q.enqueue('x', { id: 'a' });
    expect((await rejection(q.take(AbortSignal.abort()))).reason).toBe('CANCELLED');
    const timeout = await rejection(q.take(AbortSignal.abort(new DOMException('late', 'TimeoutError'))));
    expect(timeout.code).toBe(Code.DEADLINE_EXCEEDED);
    expect(timeout.reason).toBe('TIMEOUT');
    expect(q.size).toBe(1);
  });
});

describe('remove', () => {
  it('removes a queued item by id', () => {
    const q = queue();
    q.enqueue('a', { id: 'a', priority: 1 });
    q.enqueue('b', { id: 'b', priority: 2 });
    q.enqueue('c', { id: 'c', priority: 3 });
    expect(q.has('b')).toBe(true);
    expect(q.remove('b')).toBe('b');
    expect(q.has('b')).toBe(false);
    expect(q.remove('b')).toBeUndefined();
    expect(q.remove('zzz')).toBeUndefined();
    expect(drain(q)).toEqual(['c', 'a']);
    // A removed id may be enqueued again.
    q.enqueue('b2', { id: 'b' });
    expect(q.size).toBe(1);
  });
});

describe('capacity', () => {
  it('refuses work beyond maxLength with QUEUE_FULL and keeps the queue intact', () => {
    const q = queue(2);
    q.enqueue('a', { id: 'a' });
    q.enqueue('b', { id: 'b' });
    const err = thrown(() => q.enqueue('c', { id: 'c', priority: 100 }));
    expect(err.code).toBe(Code.RESOURCE_EXHAUSTED);
    expect(err.reason).toBe('QUEUE_FULL');
    expect(err.retryAfterMs).toBe(1000);
    expect(err.message).toContain('queue dit-tiny is full (2 tasks waiting)');
    expect(q.size).toBe(2);
    expect(q.has('c')).toBe(false);
    q.dequeue();
    q.enqueue('c', { id: 'c' });
    expect(q.size).toBe(2);
  });

  it('takes admitted work past maxLength, in priority order', () => {
    const q = queue(1);
    q.enqueue('new', { id: 'new' });
    expect(() => q.enqueue('late', { id: 'late' })).toThrow(/full/);
    q.enqueue('next-stage', { id: 'next-stage', priority: 5, admitted: true });
    expect(q.size).toBe(2);
    expect(drain(q)).toEqual(['next-stage', 'new']);
  });

  it('suggests a retry delay from the observed drain rate', () => {
    let t = 0;
    const q = queue(1, () => t);
    for (let i = 0; i < 5; i++) {
      q.enqueue(`item ${i}`, { id: `t${i}` });
      t += 2500;
      q.dequeue();
    }
    q.enqueue('x', { id: 'x' });
    expect(thrown(() => q.enqueue('y', { id: 'y' })).retryAfterMs).toBe(2500);
  });
});

describe('close', () => {
  it('refuses new work, rejects waiters and still drains what is queued', async () => {
    const waiting = queue();
    const pending = waiting.take();
    waiting.close();
    expect((await rejection(pending)).reason).toBe('DRAINING');

    const q = queue();
    q.enqueue('left', { id: 'a' });
    q.close();
    q.close();
    const err = thrown(() => q.enqueue('late', { id: 'b' }));
    expect(err.code).toBe(Code.UNAVAILABLE);
    expect(err.reason).toBe('DRAINING');
    expect(await q.take()).toBe('left');
    expect((await rejection(q.take())).reason).toBe('DRAINING');
  });
});

describe('createTaskQueue', () => {
  it('defaults to the memory backend', () => {
    const q = createTaskQueue();
    expect(q).toBeInstanceOf(MemoryTaskQueue);
    expect(q.maxLength).toBe(1000);
  });

  it('rejects an unknown backend naming the available ones', () => {
    expect(() => createTaskQueue({ backend: 'redis' as never }, { name: 'p' })).toThrow(ConfigError);
    expect(() => createTaskQueue({ backend: 'redis' as never }, { name: 'p' })).toThrow(
      'config: backend (from task queue p): unknown task queue backend "redis" (available: memory)',
    );
    expect(() => createTaskQueue({ maxLength: 0 })).toThrow(/maxLength/);
  });
});
