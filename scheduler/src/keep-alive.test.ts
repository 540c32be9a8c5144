/**
 * A request waiting out a retry's back-off is work in flight: an embedded caller awaiting it
 * (the CLI, with nothing else keeping its process alive) must get its end, not a process
 * that exits under it (Node's exit code 13, an unsettled top-level await).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const DIST = fileURLToPath(new URL('../dist/index.js', import.meta.url));
const CORE = fileURLToPath(import.meta.resolve('@diffmesh/core'));
const TENSORS = fileURLToPath(import.meta.resolve('@diffmesh/tensor-client'));

const script = `
import { Code, DiffmeshError, silentLogger } from ${JSON.stringify(CORE)};
import { createTensorStore } from ${JSON.stringify(TENSORS)};
import { LocalInstance, PlanRegistry, Scheduler } from ${JSON.stringify(DIST)};
const registry = PlanRegistry.fromEntries([{
  model: 'm', modalities: ['text-to-image'], stages: [{ name: 'text_encoding', pool: 'enc' }],
  defaults: { width: 64, height: 64, steps: 1, guidanceScale: 1 },
  constraints: { maxWidth: 64, maxHeight: 64, sizeMultiple: 8 },
}]);
let tries = 0;
const handler = {
  stage: 'text_encoding',
  models: () => [],
  async execute() {
    tries += 1;
    // The first try fails with a retryable error; the retry waits out a back-off timer.
    if (tries === 1) throw new DiffmeshError(Code.UNAVAILABLE, 'STAGE_FAILED', 'flaky');
    return { outputs: {} };
  },
};
const s = new Scheduler({
  registry, store: createTensorStore({ backend: 'memory' }), log: silentLogger(),
  limits: { maxQueueLength: 10, maxInFlight: 10, maxAttempts: 3, retryBackoffMs: 300, defaultTimeoutMs: 0, stageTimeoutMs: 0, retentionMs: 60000 },
});
s.addInstance(new LocalInstance('i', 'enc', handler, 1, silentLogger()));
const state = await s.submit({ model: 'm', params: { prompt: 'x' } });
let last;
for await (const e of s.watch(state.context.reqId)) last = e;
process.stdout.write(last.type + ' after ' + tries + ' tries');
await s.stop();
`;

describe('an embedded request waiting out a retry back-off', () => {
  it('keeps its process alive until it ends', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { timeout: 30_000 });
    expect(stdout).toBe('completed after 2 tries');
  });
});
