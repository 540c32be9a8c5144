import { describe, expect, it } from 'vitest';
import type { Logger } from '../logging/index.js';
import { startMetricsEndpoint } from '../metrics-endpoint.js';
import { advertisedAddress, hostOf, isWildcardHost } from './advertise.js';

/** A logger that keeps its warnings' messages. */
function capture(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const log = { warn: (_fields: unknown, msg: string) => lines.push(msg) } as unknown as Logger;
  return { log, lines };
}

describe('advertisedAddress', () => {
  it('is the bound address without an advertise address', () => {
    expect(advertisedAddress({ listen: '10.1.2.3:0', bound: '10.1.2.3:4100', advertise: '' })).toBe('10.1.2.3:4100');
  });

  it('takes host:port as given, and the bound port for a host alone or port 0', () => {
    const bound = '127.0.0.1:4100';
    expect(advertisedAddress({ listen: '0.0.0.0:0', bound, advertise: 'node-7.internal:7000' })).toBe('node-7.internal:7000');
    expect(advertisedAddress({ listen: '0.0.0.0:0', bound, advertise: '10.0.0.7' })).toBe('10.0.0.7:4100');
    expect(advertisedAddress({ listen: '0.0.0.0:0', bound, advertise: '10.0.0.7:0' })).toBe('10.0.0.7:4100');
    expect(advertisedAddress({ listen: '[::]:0', bound, advertise: 'fd00::7' })).toBe('[fd00::7]:4100');
    expect(advertisedAddress({ listen: '[::]:0', bound, advertise: '[fd00::7]:7000' })).toBe('[fd00::7]:7000');
  });

  it('warns that a wildcard listener without an advertise address registers loopback', () => {
    const { log, lines } = capture();
    expect(advertisedAddress({ listen: '0.0.0.0:7000', bound: '127.0.0.1:7000', advertise: '' }, log)).toBe('127.0.0.1:7000');
    expect(lines.join('')).toMatch(/--advertise-address/);
    const quiet = capture();
    advertisedAddress({ listen: '0.0.0.0:7000', bound: '127.0.0.1:7000', advertise: '10.0.0.7' }, quiet.log);
    advertisedAddress({ listen: '10.0.0.7:7000', bound: '10.0.0.7:7000', advertise: '' }, quiet.log);
    expect(quiet.lines).toEqual([]);
  });

  it('knows wildcard hosts and the host of an address', () => {
    expect(['0.0.0.0', '::', '[::]', ''].every(isWildcardHost)).toBe(true);
    expect(isWildcardHost('127.0.0.1')).toBe(false);
    expect(hostOf('10.0.0.7:80')).toBe('10.0.0.7');
    expect(hostOf('[fd00::7]:80')).toBe('[fd00::7]');
    expect(hostOf('node-7')).toBe('node-7');
  });

  it('names a metrics endpoint listening on every interface by the advertised host', async () => {
    const source = { contentType: 'text/plain', render: () => '' };
    const log = capture().log;
    const advertised = await startMetricsEndpoint(source, '0.0.0.0:0', log, '10.0.0.7');
    const loopback = await startMetricsEndpoint(source, '0.0.0.0:0', log);
    try {
      expect(advertised.url).toMatch(/^http:\/\/10\.0\.0\.7:\d+\/metrics$/);
      expect(loopback.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    } finally {
      await advertised.close();
      await loopback.close();
    }
  });
});
