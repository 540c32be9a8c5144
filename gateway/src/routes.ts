/**
 * HTTP routes derived from the `google.api.http` annotations (grpc-gateway style). Every
 * binding `httpBindings()` reports becomes a route at start-up: path templates with
 * `{field}` / `{field=pattern}` variables and `:verb` suffixes, `body: "*"` or a body field,
 * and query parameters for the remaining fields. No RPC has a handler of its own.
 */
import type { HttpBinding } from '@diffmesh/protos';
import protobuf from 'protobufjs';
import { percentDecode } from './http-util.js';
import { badField, protoRoot } from './proto-json.js';

type Atom = { kind: 'literal'; value: string; capture?: string } | { kind: 'any'; capture?: string } | { kind: 'deep'; capture?: string };

/** A parsed path template. */
export interface PathTemplate {
  /** The template as written, e.g. `/api/v1/requests/{req_id}:cancel`. */
  source: string;
  atoms: Atom[];
  verb?: string;
  /** Field paths bound by variables, in order. */
  variables: string[];
}

function templateError(source: string, why: string): Error {
  return new Error(`invalid HTTP path template "${source}": ${why}`);
}

/**
 * Parses a path template: `"/" Segments [":" Verb]`, where a segment is `*`, `**`, a literal
 * or `{field.path}` / `{field.path=Segments}`.
 */
export function parseTemplate(source: string): PathTemplate {
  if (!source.startsWith('/')) throw templateError(source, 'must start with "/"');
  let body = source.slice(1);
  let verb: string | undefined;
  // The verb is a ':' after the last '/' that is outside any variable.
  let depth = 0;
  for (let i = body.length - 1; i >= 0; i--) {
    const c = body[i];
    if (c === '}') depth++;
    else if (c === '{') depth--;
    else if (c === '/' && depth === 0) break;
    else if (c === ':' && depth === 0) {
      verb = body.slice(i + 1);
      body = body.slice(0, i);
      if (!verb) throw templateError(source, 'empty verb');
      break;
    }
  }
  const atoms: Atom[] = [];
  const variables: string[] = [];
  const parts: string[] = [];
  depth = 0;
  let cur = '';
  for (const c of body) {
    if (c === '{') depth++;
    if (c === '}') depth--;
    if (c === '/' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += c;
  }
  parts.push(cur);
  const plain = (seg: string, capture?: string): Atom => {
    if (seg === '*') return { kind: 'any', ...(capture ? { capture } : {}) };
    if (seg === '**') return { kind: 'deep', ...(capture ? { capture } : {}) };
    if (!seg || /[{}=]/.test(seg)) throw templateError(source, `bad segment "${seg}"`);
    return { kind: 'literal', value: seg, ...(capture ? { capture } : {}) };
  };
  for (const part of parts) {
    if (part.startsWith('{')) {
      if (!part.endsWith('}')) throw templateError(source, `unclosed variable "${part}"`);
      const inner = part.slice(1, -1);
      const eq = inner.indexOf('=');
      const field = eq === -1 ? inner : inner.slice(0, eq);
      if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(field)) throw templateError(source, `bad field path "${field}"`);
      variables.push(field);
      const pattern = eq === -1 ? ['*'] : inner.slice(eq + 1).split('/');
      for (const seg of pattern) atoms.push(plain(seg, field));
    } else {
      atoms.push(plain(part));
    }
  }
  const deep = atoms.findIndex((a) => a.kind === 'deep');
  if (deep !== -1 && deep !== atoms.length - 1) throw templateError(source, '"**" must be the last segment');
  return { source, atoms, ...(verb ? { verb } : {}), variables };
}

/**
 * Matches raw (still percent-encoded) path segments, verb already removed, against a
 * template. Returns the variable values (decoded), or undefined. A variable whose value is
 * not valid percent-encoding is a 400 naming its field.
 */
export function matchTemplate(tpl: PathTemplate, segments: readonly string[]): Record<string, string> | undefined {
  const captured = new Map<string, string[]>();
  const atoms = tpl.atoms;
  let i = 0;
  for (const atom of atoms) {
    if (atom.kind === 'deep') {
      const rest = segments.slice(i);
      if (atom.capture) captured.set(atom.capture, [...(captured.get(atom.capture) ?? []), ...rest]);
      i = segments.length;
      break;
    }
    const seg = segments[i];
    if (seg === undefined) return undefined;
    if (atom.kind === 'literal' && percentDecode(seg) !== atom.value) return undefined;
    if (atom.kind === 'any' && seg === '') return undefined;
    if (atom.capture) captured.set(atom.capture, [...(captured.get(atom.capture) ?? []), seg]);
    i++;
  }
  if (i !== segments.length) return undefined;
  const out: Record<string, string> = {};
  for (const [field, segs] of captured) {
    const decoded = segs.map(percentDecode);
    if (decoded.some((d) => d === undefined)) throw badField(field, 'malformed percent-encoding in the URL path');
    out[field] = decoded.join('/');
  }
  return out;
}

/** One route: an annotated binding with its resolved method and message types. */
export interface ProtoRoute {
  binding: HttpBinding;
  template: PathTemplate;
  requestType: protobuf.Type;
  responseType: protobuf.Type;
  /** `SchedulerService.Get`; the metrics label and OpenAPI operation id use it. */
  id: string;
  /** Doc comment of the RPC. */
  comment: string | null;
}

/** The result of looking a request up in the table. */
export type RouteMatch =
  | { kind: 'route'; route: ProtoRoute; params: Record<string, string> }
  | { kind: 'method-not-allowed'; allowed: string[] }
  /** The path fits a route but a variable's percent-encoding is malformed: the error names it. */
  | { kind: 'malformed'; error: Error }
  | { kind: 'none' };

/** The route table built from the HTTP bindings. */
export class RouteTable {
  readonly routes: ProtoRoute[];

  constructor(bindings: readonly HttpBinding[], root: protobuf.Root = protoRoot()) {
    this.routes = bindings.map((binding) => {
      const service = root.lookupService(binding.service);
      const method = service.methods[binding.method];
      if (!method) throw new Error(`binding for unknown method ${binding.service}/${binding.method}`);
      method.resolve();
      const requestType = method.resolvedRequestType!;
      const responseType = method.resolvedResponseType!;
      const template = parseTemplate(binding.pathTemplate);
      for (const v of template.variables) {
        let t: protobuf.Type = requestType;
        for (const part of v.split('.')) {
          const f = t.fields[part];
          if (!f) throw new Error(`${binding.pathTemplate}: ${requestType.name} has no field "${v}"`);
          if (f.resolvedType instanceof protobuf.Type) t = f.resolvedType;
        }
      }
      if (binding.body && binding.body !== '*' && !requestType.fields[binding.body]) {
        throw new Error(`${binding.pathTemplate}: body field "${binding.body}" is not in ${requestType.name}`);
      }
      return {
        binding,
        template,
        requestType,
        responseType,
        id: `${service.name}.${method.name}`,
        comment: method.comment,
      };
    });
  }

  /**
   * Finds the route for a method and a raw path (no query). Templates with a verb are tried
   * first, so `/requests/abc:watch` is never read as the request id `abc:watch`.
   */
  match(httpMethod: string, rawPath: string): RouteMatch {
    const segments = rawPath.split('/').slice(1);
    const last = segments.at(-1) ?? '';
    const colon = last.lastIndexOf(':');
    const allowed = new Set<string>();
    const attempts: { verb?: string; segments: string[] }[] = [];
    if (colon > 0) attempts.push({ verb: last.slice(colon + 1), segments: [...segments.slice(0, -1), last.slice(0, colon)] });
    attempts.push({ segments });
    for (const attempt of attempts) {
      for (const route of this.routes) {
        if (route.template.verb !== attempt.verb) continue;
        let params: Record<string, string> | undefined;
        try {
          params = matchTemplate(route.template, attempt.segments);
        } catch (error) {
          return { kind: 'malformed', error: error as Error };
        }
        if (!params) continue;
        if (route.binding.httpMethod === httpMethod) return { kind: 'route', route, params };
        allowed.add(route.binding.httpMethod);
      }
      if (allowed.size > 0) return { kind: 'method-not-allowed', allowed: [...allowed] };
    }
    return { kind: 'none' };
  }
}
