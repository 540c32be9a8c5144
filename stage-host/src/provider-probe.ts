import type { ProviderChoice, WireSessionOptions } from './onnx-runner-protocol.js';
import type { SessionHost } from './session-host.js';
import { firstLine } from './session-table.js';

/**
 * Two tiny ONNX graphs (opset 17, input `x` float32[4] → output `y` float32[4], y = 2x): one in
 * float32 (`Add`), one through float16 (`Cast` to float16, `Add`, `Cast` back). Loading the first
 * on a provider says whether the provider works here; running the second on WebGPU says whether
 * the adapter has `shader-f16` (without it onnxruntime answers "requires f16 but the device does
 * not support it"). Written with the models package's graph builder (onnx-proto) and kept as
 * bytes so a stage can probe without it.
 */
const PROBE_F32 = 'CAgSCGRpZmZtZXNoOj4KEwoBeAoBeBIBeRoDYWRkIgNBZGQSBXByb2JlWg8KAXgSCgoICAESBAoCCARiDwoBeRIKCggIARIECgIIBEIECgAQEQ==';
const PROBE_F16 =
  'CAgSCGRpZmZtZXNoOogBCh8KAXgSAWgaBnRvX2YxNiIEQ2FzdCoJCgJ0bxgKoAECChcKAWgKAWgSAXMaB2FkZF9mMTYiA0FkZAofCgFzEgF5GgZ0b19mMzIiBENhc3QqCQoCdG8YAaABAhIJcHJvYmVfZjE2Wg8KAXgSCgoICAESBAoCCARiDwoBeRIKCggIARIECgIIBEIECgAQEQ==';

/** What a provider does on this machine. */
export interface ProviderProbe {
  provider: string;
  /** A session loads and runs (float32) on it. */
  works: boolean;
  /** Why it does not (onnxruntime's first line). */
  error?: string;
  /** Float16 graphs run on it (WebGPU: the adapter has `shader-f16`); undefined when it does not work at all. */
  f16?: boolean;
  /** Why float16 does not run. */
  f16Error?: string;
}

/** Loads and runs the probe graphs on `provider` in `host`. */
export async function probeProvider(host: SessionHost, provider: ProviderChoice, options: WireSessionOptions = {}): Promise<ProviderProbe> {
  const x = Float32Array.of(1, 2, 3, 0.5);
  const run = async (model: string): Promise<void> => {
    const loaded = await host.loadSession(Buffer.from(model, 'base64'), provider, { ...options, logSeverityLevel: 4 });
    try {
      const out = await host.run(loaded.session, { x: { type: 'float32', dims: [4], data: x } });
      const y = out.y?.data as Float32Array | undefined;
      if (!y || y.length !== 4 || y.some((v, i) => v !== 2 * x[i]))
        throw new Error(`the probe graph gave [${y ? Array.from(y).join(', ') : ''}], not 2x`);
    } finally {
      await host.release(loaded.session).catch(() => undefined);
    }
  };
  try {
    await run(PROBE_F32);
  } catch (err) {
    return { provider: provider.name, works: false, error: firstLine((err as Error)?.message ?? String(err)) };
  }
  try {
    await run(PROBE_F16);
    return { provider: provider.name, works: true, f16: true };
  } catch (err) {
    return { provider: provider.name, works: true, f16: false, f16Error: firstLine((err as Error)?.message ?? String(err)) };
  }
}

/** True when an onnxruntime error says a float16 program cannot run on the device. */
export function isMissingF16(message: string): boolean {
  return /requires f16 but the device does not support it/.test(message);
}
