import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { DiffmeshError, Code } from '../errors/index.js';
import { createLogger, silentLogger, traceFieldsFromTraceparent, withContext } from './index.js';

function capture(): { stream: Writable; lines: () => Record<string, unknown>[]; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  const text = (): string => chunks.join('');
  return {
    stream,
    text,
    lines: () =>
      text()
        .split('\n')
        .filter((l) => l.length > 0)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('createLogger', () => {
  it('writes JSON lines with name, level label, time and message', () => {
    const out = capture();
    const log = createLogger({ name: 'scheduler', destination: out.stream, base: { nodeId: 'n1' } });
    log.info({ pool: 'dit-tiny' }, 'task queued');
    const [line] = out.lines();
    expect(line).toMatchObject({ name: 'scheduler', level: 'info', msg: 'task queued', pool: 'dit-tiny', nodeId: 'n1' });
    expect(new Date(line.time as string).toISOString()).toBe(line.time);
  });

  it('drops lines below the level', () => {
    const out = capture();
    const log = createLogger({ name: 't', level: 'warn', destination: out.stream });
    log.info('hidden');
    log.warn('shown');
    expect(out.lines().map((l) => l.msg)).toEqual(['shown']);
  });

  it('rejects an unknown level', () => {
    expect(() => createLogger({ name: 't', level: 'loud' as never })).toThrow(/unknown level "loud"/);
  });

  it('serialises DiffmeshError with code and reason', () => {
    const out = capture();
    const log = createLogger({ name: 't', destination: out.stream });
    log.error({ err: new DiffmeshError(Code.RESOURCE_EXHAUSTED, 'QUEUE_FULL', 'queue full') }, 'rejected');
    expect(out.lines()[0].err).toMatchObject({
      type: 'DiffmeshError',
      message: 'queue full',
      reason: 'QUEUE_FULL',
      code: Code.RESOURCE_EXHAUSTED,
    });
  });

  it('redacts secrets', () => {
    const out = capture();
    const log = createLogger({ name: 't', destination: out.stream });
    log.info({ headers: { authorization: 'Bearer abc' }, apiKey: 'k' }, 'req');
    const line = out.lines()[0];
    expect(line.headers).toEqual({ authorization: '[redacted]' });
    expect(line.apiKey).toBe('[redacted]');
  });

  it('redacts the credentials of durable tensor stores', () => {
    const out = capture();
    const log = createLogger({ name: 't', destination: out.stream });
    const durableLocation = { uri: 'redis://h:6379/0', password: 'pw' };
    log.info(
      { config: { durable: 'redis://:pw@h:6379/0', durableLocation }, env: { REDIS_URL: 'redis://:pw@h', AWS_SECRET_ACCESS_KEY: 's' } },
      'x',
    );
    const text = JSON.stringify(out.lines()[0]);
    expect(text).not.toContain('pw');
    expect(text).not.toContain('"s"');
    expect(out.lines()[0].config).toMatchObject({
      durable: '[redacted]',
      durableLocation: { uri: 'redis://h:6379/0', password: '[redacted]' },
    });
  });

  it('redacts NATS seeds and private keys', () => {
    const out = capture();
    const log = createLogger({ name: 't', destination: out.stream });
    log.info({ user: { seed: 'SUAXYZ', publicKey: 'UABC' }, mesh: { natsClientSeed: 'SUAQRS' }, tls: { privateKey: 'PEMKEY' } }, 'x');
    const text = JSON.stringify(out.lines()[0]);
    for (const secret of ['SUAXYZ', 'SUAQRS', 'PEMKEY']) expect(text).not.toContain(secret);
    expect(text).toContain('UABC'); // a public key stays readable
  });

  it('adds mixin fields to every line', () => {
    const out = capture();
    const log = createLogger({ name: 't', destination: out.stream, mixin: () => ({ traceId: 'abc' }) });
    log.info('x');
    expect(out.lines()[0].traceId).toBe('abc');
  });

  it('writes human-readable lines in pretty mode', async () => {
    const out = capture();
    const log = createLogger({ name: 'cli', pretty: true, colorize: false, destination: out.stream });
    log.info({ reqId: 'r1' }, 'hello');
    await new Promise((r) => setImmediate(r));
    expect(out.text()).toMatch(/INFO.*\(cli\): hello/);
    expect(out.text()).toContain('reqId: "r1"');
  });

  it("writes pretty lines with format pretty (the services' --log-format), JSON lines with format json", async () => {
    const pretty = capture();
    createLogger({ name: 'svc', format: 'pretty', colorize: false, destination: pretty.stream }).info('hello');
    const json = capture();
    createLogger({ name: 'svc', format: 'json', destination: json.stream }).info('hello');
    await new Promise((r) => setImmediate(r));
    expect(pretty.text()).toMatch(/INFO.*\(svc\): hello/);
    expect(JSON.parse(json.text().trim())).toMatchObject({ name: 'svc', msg: 'hello', level: 'info' });
  });
});

describe('withContext', () => {
  it('binds request and trace ids, leaving out undefined ones', () => {
    const out = capture();
    const log = withContext(createLogger({ name: 't', destination: out.stream }), {
      reqId: 'req-1',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: undefined,
      stage: 'denoising',
    });
    log.info('step');
    const line = out.lines()[0];
    expect(line).toMatchObject({ reqId: 'req-1', traceId: '4bf92f3577b34da6a3ce929d0e0e4736', stage: 'denoising' });
    expect('spanId' in line).toBe(false);
  });
});

describe('silentLogger', () => {
  it('logs nothing at any level', () => {
    const log = silentLogger();
    expect(log.isLevelEnabled('fatal')).toBe(false);
    expect(withContext(log, { reqId: 'r' }).isLevelEnabled('error')).toBe(false);
  });
});

describe('traceFieldsFromTraceparent', () => {
  it('extracts ids from a valid header and ignores invalid ones', () => {
    expect(traceFieldsFromTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toEqual({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
    });
    expect(traceFieldsFromTraceparent('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).toEqual({});
    expect(traceFieldsFromTraceparent('garbage')).toEqual({});
    expect(traceFieldsFromTraceparent(undefined)).toEqual({});
  });
});
