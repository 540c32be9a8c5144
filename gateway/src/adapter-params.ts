import { Code, DEFAULT_ADAPTER_SCALE, type AdapterParams } from '@diffmesh/core';
import { gatewayError } from './errors.js';
import { describeValue } from './proto-json.js';

function invalid(field: string, message: string) {
  return gatewayError(Code.INVALID_ARGUMENT, 'INVALID_PARAMETER', message, { field });
}

/**
 * `adapters` of an OpenAI-style body (the openai SDKs send `extra_body` fields at the top
 * level): `[{ "name": "…", "scale": 0.8 }]`, or that list as a JSON string (multipart forms).
 * Only the shape is checked here; names and scales are the scheduler's to check, and its
 * errors name `adapters[i].name` / `adapters[i].scale`.
 */
export function optAdapters(body: Record<string, unknown>): AdapterParams[] | undefined {
  let raw = body.adapters;
  if (raw === undefined || raw === null || raw === '') return undefined;
  if (typeof raw === 'string') {
    try {
      raw = JSON.parse(raw);
    } catch {
      throw invalid('adapters', 'expected a JSON list of {"name", "scale"}');
    }
  }
  if (!Array.isArray(raw)) throw invalid('adapters', `expected a list of {"name", "scale"}, got ${describeValue(raw)}`);
  return raw.map((a: unknown, i) => {
    if (a === null || typeof a !== 'object' || Array.isArray(a))
      throw invalid(`adapters[${i}]`, `expected {"name", "scale"}, got ${describeValue(a)}`);
    const { name, scale, ...rest } = a as Record<string, unknown>;
    const extra = Object.keys(rest)[0];
    if (extra !== undefined) throw invalid(`adapters[${i}].${extra}`, 'unrecognized field (supported: name, scale)');
    if (typeof name !== 'string') throw invalid(`adapters[${i}].name`, `expected a string, got ${describeValue(name)}`);
    if (scale === undefined || scale === null) return { name, scale: DEFAULT_ADAPTER_SCALE };
    if (typeof scale !== 'number') throw invalid(`adapters[${i}].scale`, `expected a number, got ${describeValue(scale)}`);
    return { name, scale };
  });
}
