import { cpSync, existsSync, mkdtempSync, rmSync, unlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import * as grpc from '@grpc/grpc-js';
import { FileDescriptorSet, type IFileDescriptorSet } from 'protobufjs/ext/descriptor/index.js';
import { afterAll, describe, expect, it } from 'vitest';

import {
  DESCRIPTOR_SET_FILE,
  GENERATED_DIR,
  PKG_DIR,
  MESSAGE_ROOT_FILE,
  checkDescriptorSet,
  checkGenerated,
  checkMessageRoot,
  formatDescriptorDrift,
  listProtoFiles,
} from '../scripts/codegen.mjs';
import {
  DESCRIPTOR_SET_PATH,
  MESSAGE_ROOT_PATH,
  PROTO_FILES,
  PROTO_ROOT,
  SERVICE_NAMES,
  httpBindings,
  loadDiffmeshPackageDefinition,
  loadDiffmeshProtos,
  loadDiffmeshRoot,
  messageCodec,
  newDiffmeshRoot,
  readDescriptorSet,
  type ObjectRef,
  type ObjectRef__Output,
} from './index.js';

describe('loading', () => {
  it('finds the proto root on disk and lists every proto file', () => {
    expect(existsSync(join(PROTO_ROOT, 'diffmesh/common/v1/object.proto'))).toBe(true);
    expect(existsSync(join(PROTO_ROOT, 'third_party/google/api/annotations.proto'))).toBe(true);
    // A new .proto file must be added to PROTO_FILES, or services would not see it.
    expect([...PROTO_FILES].sort()).toEqual(listProtoFiles().sort());
  });

  it('loads every service with its methods and streaming shapes', () => {
    const protos = loadDiffmeshProtos();
    const expected: Record<string, Record<string, [requestStream: boolean, responseStream: boolean]>> = {
      [SERVICE_NAMES.scheduler]: {
        Generate: [false, true],
        Submit: [false, false],
        Get: [false, false],
        Cancel: [false, false],
        Watch: [false, true],
        GetResult: [false, true],
        ListModels: [false, false],
        GetStatus: [false, false],
        Session: [true, true],
      },
      [SERVICE_NAMES.stage]: {
        Execute: [false, true],
        Describe: [false, false],
        Work: [true, true],
      },
      [SERVICE_NAMES.tensor]: {
        Put: [true, false],
        PutObjects: [true, true],
        Get: [false, true],
        Stat: [false, false],
        Delete: [false, false],
        Touch: [false, false],
      },
    };
    const ctors: Record<string, { service: grpc.ServiceDefinition }> = {
      [SERVICE_NAMES.scheduler]: protos.diffmesh.scheduler.v1.SchedulerService,
      [SERVICE_NAMES.stage]: protos.diffmesh.stage.v1.StageService,
      [SERVICE_NAMES.tensor]: protos.diffmesh.tensor.v1.TensorService,
    };
    for (const [name, methods] of Object.entries(expected)) {
      const ctor = ctors[name];
      expect(typeof ctor, name).toBe('function');
      const service = ctor.service;
      expect(Object.keys(service).sort(), name).toEqual(Object.keys(methods).sort());
      for (const [method, [reqStream, resStream]] of Object.entries(methods)) {
        expect(service[method]?.path).toBe(`/${name}/${method}`);
        expect([service[method]?.requestStream, service[method]?.responseStream], `${name}/${method}`).toEqual([reqStream, resStream]);
      }
      // The definition is usable by a server.
      const server = new grpc.Server();
      expect(() => server.addService(service, {})).not.toThrow();
      server.forceShutdown();
    }
  });

  it('encodes 64-bit integers as decimal strings and enums by name', () => {
    const codec = messageCodec<ObjectRef, ObjectRef__Output>('diffmesh.common.v1.ObjectRef');
    const bytes = codec.encode({ objectId: 'r1:latents:a', shape: ['1', '4', '9007199254740993'], dtype: 'DTYPE_FLOAT16' });
    const back = codec.decode(bytes);
    expect(back.shape).toEqual(['1', '4', '9007199254740993']);
    expect(back.dtype).toBe('DTYPE_FLOAT16');
    expect(back.ownerAddress).toBe('');
    expect(codec.typeUrl).toBe('type.googleapis.com/diffmesh.common.v1.ObjectRef');
  });
});

describe('http annotations', () => {
  const expected = [
    ['SchedulerService', 'Generate', 'POST', '/api/v1/generate', '*'],
    ['SchedulerService', 'Submit', 'POST', '/api/v1/requests', '*'],
    ['SchedulerService', 'Get', 'GET', '/api/v1/requests/{req_id}', ''],
    ['SchedulerService', 'Cancel', 'POST', '/api/v1/requests/{req_id}:cancel', '*'],
    ['SchedulerService', 'Watch', 'GET', '/api/v1/requests/{req_id}:watch', ''],
    ['SchedulerService', 'GetResult', 'GET', '/api/v1/requests/{req_id}/result', ''],
    ['SchedulerService', 'ListModels', 'GET', '/api/v1/models', ''],
    ['SchedulerService', 'GetStatus', 'GET', '/api/v1/status', ''],
    ['TensorService', 'Stat', 'GET', '/api/v1/objects/{object_id}', ''],
    ['TensorService', 'Get', 'GET', '/api/v1/objects/{object_id}/content', ''],
  ] as const;

  it.each(expected)('%s.%s is bound to %s %s', (service, method, httpMethod, template, body) => {
    const fullService = service === 'SchedulerService' ? SERVICE_NAMES.scheduler : SERVICE_NAMES.tensor;
    // Straight from the loaded descriptor, as the gateway reads it.
    const def = loadDiffmeshPackageDefinition()[fullService] as Record<string, { options: Record<string, unknown> }>;
    const rule = def[method]?.options['(google.api.http)'] as Record<string, string> | undefined;
    expect(rule).toBeDefined();
    expect(rule?.[httpMethod.toLowerCase()]).toBe(template);
    expect(rule?.body ?? '').toBe(body);

    const binding = httpBindings().find((b) => b.service === fullService && b.method === method);
    expect(binding).toMatchObject({ httpMethod, pathTemplate: template, body });
  });

  it('binds nothing else, and everything under /api/v1/ (never the OpenAI /v1/ space)', () => {
    const bindings = httpBindings();
    expect(bindings).toHaveLength(expected.length);
    for (const b of bindings) expect(b.pathTemplate.startsWith('/api/v1/'), b.pathTemplate).toBe(true);
    // Internal services stay off HTTP.
    expect(bindings.some((b) => b.service === SERVICE_NAMES.stage)).toBe(false);
  });
});

describe('generated types', () => {
  const temps: string[] = [];
  afterAll(() => {
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  it('are up to date with proto/', () => {
    const result = checkGenerated();
    expect(result, 'run `npm run gen -w @diffmesh/protos`').toMatchObject({ ok: true });
  });

  it('the drift check reports a changed, a deleted and a stray file', () => {
    const copy = mkdtempSync(join(tmpdir(), 'diffmesh-protos-test-'));
    temps.push(copy);
    cpSync(join(PKG_DIR, GENERATED_DIR), copy, { recursive: true });
    const changed = 'diffmesh/common/v1/ObjectRef.ts';
    writeFileSync(join(copy, changed), readFileSync(join(copy, changed), 'utf8').replace("'objectId'", "'objectID'"));
    unlinkSync(join(copy, 'diffmesh/tensor/v1/Chunk.ts'));
    writeFileSync(join(copy, 'diffmesh/common/v1/Stale.ts'), 'export {};\n');

    const result = checkGenerated({ generatedDir: copy });
    expect(result.ok).toBe(false);
    expect(result.changed).toEqual([changed]);
    expect(result.missing).toEqual(['diffmesh/tensor/v1/Chunk.ts']);
    expect(result.extra).toEqual(['diffmesh/common/v1/Stale.ts']);
  });
});

describe('descriptor set', () => {
  const temps: string[] = [];
  afterAll(() => {
    for (const t of temps) rmSync(t, { recursive: true, force: true });
  });

  it('is up to date with proto/', () => {
    const result = checkDescriptorSet();
    expect(result, 'run `npm run gen -w @diffmesh/protos`').toEqual({ ok: true, missing: false });
  });

  it('is shipped: clients resolve it through the package exports', () => {
    const resolved = createRequire(import.meta.url).resolve('@diffmesh/protos/descriptors.binpb');
    expect(readFileSync(resolved).equals(readDescriptorSet())).toBe(true);
    expect(DESCRIPTOR_SET_PATH).toBe(join(PKG_DIR, DESCRIPTOR_SET_FILE));
    const pkg = JSON.parse(readFileSync(join(PKG_DIR, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain(DESCRIPTOR_SET_FILE);
  });

  it('holds every proto file by its import path, with its imports', () => {
    const set = FileDescriptorSet.toObject(FileDescriptorSet.decode(readDescriptorSet())) as IFileDescriptorSet;
    const names = new Set((set.file ?? []).map((f) => f.name));
    for (const file of [
      ...PROTO_FILES,
      'google/api/annotations.proto',
      'google/protobuf/descriptor.proto',
      'google/protobuf/timestamp.proto',
      'grpc/health/v1/health.proto',
      'grpc/reflection/v1/reflection.proto',
      'grpc/reflection/v1alpha/reflection.proto',
    ]) {
      expect(names.has(file), file).toBe(true);
    }
  });

  it('the drift check reports a changed and a missing file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'diffmesh-descriptors-test-'));
    temps.push(dir);
    const stale = join(dir, DESCRIPTOR_SET_FILE);
    const bytes = readDescriptorSet();
    writeFileSync(stale, bytes.subarray(0, bytes.length - 1));
    expect(checkDescriptorSet({ file: stale })).toEqual({ ok: false, missing: false });
    const missing = checkDescriptorSet({ file: join(dir, 'none.binpb') });
    expect(missing).toEqual({ ok: false, missing: true });
    expect(formatDescriptorDrift(missing)).toContain('npm run gen -w @diffmesh/protos');
  });
});

describe('message root', () => {
  it('is up to date with proto/', () => {
    expect(checkMessageRoot(), 'run `npm run gen -w @diffmesh/protos`').toEqual({ ok: true, missing: false });
  });

  it('holds exactly the types a parse of the .proto files gives, and is shipped', () => {
    expect(loadDiffmeshRoot().toJSON()).toEqual(newDiffmeshRoot({ keepCase: false }).toJSON());
    expect(MESSAGE_ROOT_PATH).toBe(join(PKG_DIR, MESSAGE_ROOT_FILE));
    const pkg = JSON.parse(readFileSync(join(PKG_DIR, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toContain(MESSAGE_ROOT_FILE);
  });

  it('the drift check reports a changed and a missing file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'diffmesh-root-test-'));
    try {
      const stale = join(dir, MESSAGE_ROOT_FILE);
      writeFileSync(stale, readFileSync(MESSAGE_ROOT_PATH, 'utf8').replace('"ObjectRef"', '"ObjectReference"'));
      expect(checkMessageRoot({ file: stale })).toEqual({ ok: false, missing: false });
      const missing = checkMessageRoot({ file: join(dir, 'none.json') });
      expect(missing).toEqual({ ok: false, missing: true });
      expect(formatDescriptorDrift(missing, MESSAGE_ROOT_FILE)).toContain(`${MESSAGE_ROOT_FILE} is missing`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
