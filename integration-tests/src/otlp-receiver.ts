import { EventEmitter, once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { gunzipSync } from 'node:zlib';

/** One span as received over OTLP/HTTP JSON, flattened with its resource's service name. */
export interface ReceivedSpan {
  serviceName: string;
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind number: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  statusCode: number;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface OtlpKeyValue {
  key: string;
  value?: OtlpValue;
}
interface OtlpExport {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind?: number;
        attributes?: OtlpKeyValue[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}

function attributes(list: OtlpKeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (!value) continue;
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
  }
  return out;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
}

/**
 * A minimal OTLP/HTTP trace receiver for tests: accepts `POST /v1/traces` with JSON bodies
 * (exporters configured with `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`) and keeps every span.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Bodies that were not OTLP JSON (a misconfigured exporter), for the failure message. */
  readonly rejected: string[] = [];
  private readonly events = new EventEmitter();

  private constructor(
    private readonly server: Server,
    /** Base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`, e.g. `http://127.0.0.1:43117`. */
    readonly endpoint: string,
  ) {}

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined;
    const server = createServer((req, res) => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      body(req).then(
        (buf) => {
          if (!String(req.headers['content-type'] ?? '').includes('json')) {
            receiver?.rejected.push(`content-type ${String(req.headers['content-type'])}`);
            res.writeHead(415).end();
            return;
          }
          receiver?.add(JSON.parse(buf.toString('utf8')) as OtlpExport);
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        },
        (err: unknown) => {
          receiver?.rejected.push(String(err));
          res.writeHead(400).end();
        },
      );
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const addr = server.address();
    if (!addr || typeof addr === 'string') throw new Error('OTLP receiver did not bind');
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${addr.port}`);
    return receiver;
  }

  /** Spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  /**
   * Resolves with the spans received so far once `done(spans)` holds, re-checked whenever an
   * export arrives; rejects after `timeoutMs` with what did arrive.
   */
  async waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs: number): Promise<ReceivedSpan[]> {
    if (done(this.spans)) return this.spans;
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (!done(this.spans)) return;
        cleanup();
        resolve(this.spans);
      };
      const timer = setTimeout(() => {
        cleanup();
        const seen = [...new Set(this.spans.map((s) => `${s.serviceName}/${s.name}`))].sort().join(', ');
        reject(
          new Error(
            `expected spans did not arrive within ${timeoutMs} ms; got ${this.spans.length}: ${seen}; rejected: ${this.rejected.join('; ')}`,
          ),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        this.events.off('spans', check);
      };
      this.events.on('spans', check);
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private add(msg: OtlpExport): void {
    for (const rs of msg.resourceSpans ?? []) {
      const serviceName = String(attributes(rs.resource?.attributes)['service.name'] ?? '');
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            serviceName,
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId ?? '',
            name: s.name,
            kind: s.kind ?? 0,
            attributes: attributes(s.attributes),
            statusCode: s.status?.code ?? 0,
          });
        }
      }
    }
    this.events.emit('spans');
  }
}
