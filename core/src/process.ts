import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { ConfigError, loadConfig, type ConfigDefinition } from './config/index.js';
import type { Logger } from './logging/index.js';

/** Options of {@link runProcess}. */
export interface RunProcessOptions {
  /** Flushed and shut down after the service stops (and before a failed start exits). */
  telemetry?: { shutdown(): Promise<void> };
}

/**
 * Runs `start` as a process: SIGTERM/SIGINT drain gracefully, then flush telemetry and exit
 * (a second signal forces an exit). Prints the listen line on stdout for supervisors such
 * as `diffmesh up`.
 */
export async function runProcess(
  name: string,
  log: Logger,
  start: () => Promise<{ address: string; stop(graceMs?: number): Promise<void> }>,
  opts: RunProcessOptions = {},
): Promise<void> {
  // Telemetry's shutdown never rejects; the catch is for foreign implementations.
  const flush = (): Promise<void> => opts.telemetry?.shutdown().catch(() => undefined) ?? Promise.resolve();
  let running: { address: string; stop(graceMs?: number): Promise<void> };
  try {
    running = await start();
  } catch (err) {
    log.fatal({ err }, `${name} failed to start`);
    process.stderr.write(`${name}: ${err instanceof Error ? err.message : String(err)}\n`);
    await flush();
    process.exit(1);
  }
  process.stdout.write(`${name} listening on ${running.address}\n`);
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      log.warn({ sig }, 'second signal; exiting now');
      process.exit(1);
    }
    log.info({ sig }, 'draining');
    running.stop().then(
      async () => {
        await flush();
        process.exit(0);
      },
      async (err: unknown) => {
        log.error({ err }, 'stop failed');
        await flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // A supervisor that starts its children in their own process group (`diffmesh up`, so
  // that one Ctrl-C reaches it alone) asks them to stop when it dies without stopping them.
  if (process.env.DIFFMESH_EXIT_WITH_PARENT === '1') {
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent && signals === 0) {
        log.warn({ parent }, 'supervisor gone; draining');
        onSignal('SIGTERM');
      }
    }, 1000).unref();
  }
}

/** The `version` of the package.json one folder above a compiled module (`dist/` → package root). */
export function packageVersion(moduleUrl: string): string {
  const raw = readFileSync(new URL('../package.json', moduleUrl), 'utf8');
  return (JSON.parse(raw) as { version: string }).version;
}

/** Loads a service's config from file/env/flags; on a bad config prints every problem and exits 2. */
export function loadServiceConfig<S extends z.ZodObject>(def: ConfigDefinition<S>, argv: readonly string[]): z.output<S> {
  try {
    return loadConfig(def, { argv });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${def.name}: invalid configuration\n${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}
