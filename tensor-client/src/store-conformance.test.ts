import { randomBytes } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { startRedisServer, startS3Server, type RunningRedisServer, type RunningS3Server } from '@diffmesh/testing';
import { describeTensorStoreConformance } from './fixtures/store-conformance.js';
import { MemoryTensorStore } from './memory-store.js';
import { RedisTensorStore } from './redis-store.js';
import { S3TensorStore } from './s3-store.js';
import { parseDurableLocation, type RedisLocation, type S3Location } from './durable-location.js';
import { objectFileName } from './shm-paths.js';

let redisServer: RunningRedisServer;
let s3Server: RunningS3Server;
let redis: Redis;
let s3: S3Client;

beforeAll(async () => {
  [redisServer, s3Server] = await Promise.all([startRedisServer(), startS3Server({ buckets: ['conformance'] })]);
  redis = new Redis(redisServer.url);
  s3 = new S3Client({
    endpoint: s3Server.endpoint,
    region: s3Server.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3Server.accessKeyId, secretAccessKey: s3Server.secretAccessKey },
  });
});

afterAll(async () => {
  redis?.disconnect();
  s3?.destroy();
  await Promise.all([redisServer?.stop(), s3Server?.stop()]);
});

describeTensorStoreConformance('memory', () => ({
  create: async ({ capacityBytes, defaultTtlMs }) =>
    new MemoryTensorStore({ capacityBytes: capacityBytes || 1 << 30, defaultTtlMs, sweepIntervalMs: 0 }),
  // The memory store keeps the caller's bytes without copying them.
  corrupt: async (_store, _ref, input) => {
    input.data[0] ^= 0xff;
  },
  largeBytes: (1 << 20) + 123,
}));

const REDIS_CHUNK = 64 * 1024;

describeTensorStoreConformance('redis', () => ({
  create: async ({ capacityBytes, defaultTtlMs }) =>
    new RedisTensorStore({
      location: parseDurableLocation(`${redisServer.url}/0/t-${randomBytes(4).toString('hex')}`) as RedisLocation,
      capacityBytes,
      defaultTtlMs,
      chunkBytes: REDIS_CHUNK,
    }),
  corrupt: async (store, ref) => {
    const prefix = (parseDurableLocation((store as RedisTensorStore).uri) as RedisLocation).prefix;
    const ver = await redis.hget(`${prefix}:m:${ref.objectId}`, 'ver');
    const key = `${prefix}:d:${ver}:0`;
    const first = (await redis.getrangeBuffer(key, 0, 0))[0];
    await redis.setrange(key, 0, Buffer.from([first ^ 0xff]));
  },
  largeBytes: 16 * REDIS_CHUNK + 123,
  partsOf: async (store) => {
    const prefix = (parseDurableLocation((store as RedisTensorStore).uri) as RedisLocation).prefix;
    return (await redis.keys(`${prefix}:d:*`)).length;
  },
}));

const S3_PART = 5 * 1024 * 1024;

describeTensorStoreConformance('s3', () => ({
  create: async ({ capacityBytes, defaultTtlMs }) =>
    new S3TensorStore({
      location: parseDurableLocation(`s3://conformance/t-${randomBytes(4).toString('hex')}`) as S3Location,
      endpoint: s3Server.endpoint,
      region: s3Server.region,
      client: { credentials: { accessKeyId: s3Server.accessKeyId, secretAccessKey: s3Server.secretAccessKey } },
      capacityBytes,
      defaultTtlMs,
      partBytes: S3_PART,
    }),
  corrupt: async (store, ref, input) => {
    const loc = parseDurableLocation((store as S3TensorStore).uri) as S3Location;
    const meta = await s3.send(new GetObjectCommand({ Bucket: loc.bucket, Key: `${loc.prefix}/m/${objectFileName(ref.objectId)}` }));
    const { ver } = JSON.parse(await meta.Body!.transformToString()) as { ver: string };
    const body = Buffer.from(input.data);
    body[0] ^= 0xff;
    await s3.send(new PutObjectCommand({ Bucket: loc.bucket, Key: `${loc.prefix}/d/${objectFileName(ref.objectId)}.${ver}`, Body: body }));
  },
  largeBytes: 2 * S3_PART + 4096,
  partsOf: async (store, ref) => ((store as S3TensorStore).stats().multipartUploads > 0 ? Math.ceil(ref.sizeBytes / S3_PART) : 1),
}));
