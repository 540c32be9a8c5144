import { hostname } from 'node:os';
import { z } from 'zod';
import { natsTlsConfigFields, natsTlsConfigMappings } from '@diffmesh/discovery';
import { LogConfigSchema, MAX_PROMPT_LENGTH, TlsConfigSchema, defineConfig, logConfigMappings, tlsConfigMappings } from '@diffmesh/core';
import { MAX_INPUT_IMAGE_BYTES } from '@diffmesh/media';

const HOST_PORT = /^(\[[0-9a-fA-F:.]+\]|[^\s:/]+):\d{1,5}$/;

const hostPort = (what: string) =>
  z.string().regex(HOST_PORT, `expected host:port for ${what}, e.g. 127.0.0.1:8080 (port 0 = any free port)`);

/** The gateway's configuration (env prefix `DIFFMESH_GATEWAY_`). */
export const GatewayConfigSchema = z.object({
  listen: hostPort('the HTTP listener').default('127.0.0.1:8080').describe('public HTTP listen address host:port (port 0 = any free port)'),
  adminListen: hostPort('the admin listener')
    .default('127.0.0.1:9464')
    .describe('admin HTTP listen address for /healthz, /readyz and /metrics, never authenticated'),
  publicUrl: z
    .string()
    .refine((s) => s === '' || /^https?:\/\/\S+[^/\s]$/.test(s), 'expected an absolute http(s) URL without a trailing slash')
    .default('')
    .describe('base URL clients reach the gateway at, used in result URLs (empty = from the Host header)'),
  nodeId: z.string().min(1).default(hostname()).describe('node the gateway runs on (same-node tensor reads use shared memory)'),
  natsUrl: z
    .string()
    .default('')
    .describe('NATS server(s) for discovery of schedulers and tensor services (empty = static addresses only)'),
  natsCredentials: z
    .string()
    .default('')
    .describe(
      "file with this process's NATS credentials: an nkey user seed (SU…), a .creds file or user:password (the file, never the secret, so it stays out of argv)",
    ),
  ...natsTlsConfigFields,
  schedulerAddresses: z
    .array(hostPort('a scheduler'))
    .default([])
    .describe('scheduler gRPC addresses used besides (or instead of) the discovered ones'),
  tensorAddresses: z
    .array(hostPort('a tensor service'))
    .default([])
    .describe('tensor-svc gRPC addresses for the /api/v1/objects routes, besides the discovered ones'),
  apiKeys: z
    .array(z.string().min(1, 'an API key cannot be empty'))
    .default([])
    .describe('accepted bearer API keys (empty = authentication off; ignored with a tenants file)'),
  tenantsFile: z
    .string()
    .default('')
    .describe(
      "tenants file (the scheduler's, YAML or JSON): its API keys are the accepted ones, each naming its tenant; reloaded when it changes; empty = apiKeys",
    ),
  rateLimitPerMinute: z
    .number()
    .int()
    .nonnegative()
    .default(0)
    .describe('requests per minute per API key (per client address when auth is off); 0 = no limit'),
  rateLimitBurst: z.number().int().nonnegative().default(0).describe('bucket size of the rate limit (0 = rateLimitPerMinute)'),
  authFailuresPerMinute: z
    .number()
    .int()
    .nonnegative()
    .default(10)
    .describe(
      'failed authentication attempts allowed per client address a minute (as many saved); beyond them every request from the address is a 429 until one is earned back; 0 = no limit',
    ),
  maxBodyBytes: z
    .number()
    .int()
    .positive()
    .default(4 * 1024 * 1024)
    .describe('largest request body accepted (413 above it)'),
  maxPromptChars: z
    .number()
    .int()
    .positive()
    .default(MAX_PROMPT_LENGTH)
    .describe('longest prompt or negative prompt accepted, in characters (Unicode code points)'),
  maxImageBytes: z
    .number()
    .int()
    .positive()
    .max(MAX_INPUT_IMAGE_BYTES, `at most ${MAX_INPUT_IMAGE_BYTES} (15 MiB): a request carries its image in one gRPC message`)
    .default(MAX_INPUT_IMAGE_BYTES)
    .describe(
      'largest input image accepted (an upload to /v1/images/edits or /v1/videos, a data URL, or input_image.data on /api/v1); it comes on top of maxBodyBytes; larger is a 400 naming the field',
    ),
  corsOrigins: z
    .array(z.string().regex(/^(\*|https?:\/\/[^\s/]+)$/, 'expected "*" or an origin such as https://app.example.com'))
    .default([])
    .describe('origins allowed by CORS ("*" = any); empty = CORS off'),
  ffmpegPath: z.string().min(1).default('ffmpeg').describe('ffmpeg binary for MP4 video results (animated GIF when it does not run)'),
  resultTtlMs: z
    .number()
    .int()
    .positive()
    .max(0xffffffff)
    .default(3_600_000)
    .describe('how long image results (url format) and video jobs stay fetchable'),
  upstreamTimeoutMs: z.number().int().positive().default(30_000).describe('deadline of unary calls to schedulers and tensor services'),
  schedulerWaitMs: z
    .number()
    .int()
    .nonnegative()
    .default(10_000)
    .describe(
      'how long a call that is safe to repeat (reads, cancel, a submit with its request_id) waits for a scheduler that cannot be reached (restarting), retrying with back-off; 0 = answer 503 at once',
    ),
  maxVideoJobs: z.number().int().positive().default(1000).describe('most video jobs kept at once (oldest finished ones are dropped first)'),
  maxImageResults: z
    .number()
    .int()
    .positive()
    .default(1000)
    .describe('most image results (url format) kept at once; a new one evicts the oldest, whose URL stops working'),
  drainGraceMs: z.number().int().nonnegative().default(10_000).describe('time open requests get to finish after SIGTERM'),
  tls: TlsConfigSchema.prefault({}).describe("TLS of the gateway's calls to schedulers and tensor services (service-to-service)"),
  log: LogConfigSchema.prefault({}),
});
export type GatewayConfig = z.output<typeof GatewayConfigSchema>;
export type GatewayConfigInput = z.input<typeof GatewayConfigSchema>;

/** The gateway only calls out over TLS, so it takes no client-certificate requirement. */
const clientTls = (() => {
  const { env, flags } = tlsConfigMappings();
  delete env.TLS_REQUIRE_CLIENT_CERT;
  delete flags['tls-require-client-cert'];
  return { env, flags };
})();

export const gatewayConfig = defineConfig({
  name: 'gateway',
  schema: GatewayConfigSchema,
  envPrefix: 'DIFFMESH_GATEWAY_',
  env: {
    LISTEN: 'listen',
    ADMIN_LISTEN: 'adminListen',
    PUBLIC_URL: 'publicUrl',
    NODE_ID: 'nodeId',
    NATS_URL: 'natsUrl',
    NATS_CREDENTIALS: 'natsCredentials',
    ...natsTlsConfigMappings().env,
    SCHEDULER_ADDRESSES: 'schedulerAddresses',
    TENSOR_ADDRESSES: 'tensorAddresses',
    API_KEYS: 'apiKeys',
    TENANTS_FILE: 'tenantsFile',
    RATE_LIMIT_PER_MINUTE: 'rateLimitPerMinute',
    RATE_LIMIT_BURST: 'rateLimitBurst',
    AUTH_FAILURES_PER_MINUTE: 'authFailuresPerMinute',
    MAX_BODY_BYTES: 'maxBodyBytes',
    MAX_PROMPT_CHARS: 'maxPromptChars',
    MAX_IMAGE_BYTES: 'maxImageBytes',
    CORS_ORIGINS: 'corsOrigins',
    FFMPEG_PATH: 'ffmpegPath',
    RESULT_TTL_MS: 'resultTtlMs',
    UPSTREAM_TIMEOUT_MS: 'upstreamTimeoutMs',
    SCHEDULER_WAIT_MS: 'schedulerWaitMs',
    MAX_VIDEO_JOBS: 'maxVideoJobs',
    MAX_IMAGE_RESULTS: 'maxImageResults',
    DRAIN_GRACE_MS: 'drainGraceMs',
    ...logConfigMappings().env,
    ...clientTls.env,
  },
  flags: {
    listen: 'listen',
    'admin-listen': 'adminListen',
    'public-url': 'publicUrl',
    'node-id': 'nodeId',
    nats: 'natsUrl',
    'nats-credentials': 'natsCredentials',
    ...natsTlsConfigMappings().flags,
    schedulers: 'schedulerAddresses',
    tensors: 'tensorAddresses',
    'api-keys': 'apiKeys',
    'tenants-file': 'tenantsFile',
    'rate-limit-per-minute': 'rateLimitPerMinute',
    'rate-limit-burst': 'rateLimitBurst',
    'auth-failures-per-minute': 'authFailuresPerMinute',
    'max-body-bytes': 'maxBodyBytes',
    'max-prompt-chars': 'maxPromptChars',
    'max-image-bytes': 'maxImageBytes',
    'cors-origins': 'corsOrigins',
    ffmpeg: 'ffmpegPath',
    'result-ttl-ms': 'resultTtlMs',
    'upstream-timeout-ms': 'upstreamTimeoutMs',
    'scheduler-wait-ms': 'schedulerWaitMs',
    'max-video-jobs': 'maxVideoJobs',
    'max-image-results': 'maxImageResults',
    'drain-grace-ms': 'drainGraceMs',
    ...logConfigMappings().flags,
    ...clientTls.flags,
  },
});

/** A complete configuration from partial settings (defaults filled in, validated). */
export function gatewayConfigFrom(input: GatewayConfigInput = {}): GatewayConfig {
  return GatewayConfigSchema.parse(input);
}
