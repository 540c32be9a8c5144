// The figures of a fuzz run: inputs per surface, answers by kind (gRPC code name or HTTP
// status), the mutations tried, the normal requests that ran beside them, and anything
// that went wrong. Printed at the end of the run and written as JSON.
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface SurfaceFigures {
  inputs: number;
  /** Answers by kind: `INVALID_ARGUMENT`, `OK`, `400`, `rejected: ModelDirectoryError`, … */
  answers: Record<string, number>;
  /** Inputs by how they were made (mutation, kind of body, …). */
  made: Record<string, number>;
  /** Inputs by where they went (gRPC method, HTTP route, loader). */
  targets: Record<string, number>;
  /** Normal requests that ran beside the inputs, all of which completed. */
  normalRequests: number;
  /** Problems found: crashes, hangs, INTERNAL answers, answers that name no field. */
  failures: string[];
  ms: number;
}

/** What a whole run found, surface by surface. */
export class FuzzReport {
  readonly surfaces: Record<string, SurfaceFigures> = {};
  memory?: Record<string, number>;
  /** Uncaught exceptions and unhandled rejections while the run went on (each one a crash of a service in a real deployment). */
  readonly crashes: string[] = [];
  tensorBytes?: { baseline: number; after: number };

  constructor(readonly seed: number) {}

  surface(name: string): SurfaceFigures {
    return (this.surfaces[name] ??= { inputs: 0, answers: {}, made: {}, targets: {}, normalRequests: 0, failures: [], ms: 0 });
  }

  /** One input of `surface`, made by `made`, sent to `target`, answered with `answer`. */
  record(surface: string, input: { made: string; target: string }, answer: string): void {
    const s = this.surface(surface);
    s.inputs += 1;
    s.made[input.made] = (s.made[input.made] ?? 0) + 1;
    s.targets[input.target] = (s.targets[input.target] ?? 0) + 1;
    s.answers[answer] = (s.answers[answer] ?? 0) + 1;
  }

  /** A further answer to an input already recorded (an input that two loaders read). */
  answer(surface: string, answer: string): void {
    const s = this.surface(surface);
    s.answers[answer] = (s.answers[answer] ?? 0) + 1;
  }

  fail(surface: string, what: string): void {
    const s = this.surface(surface);
    // The first few are enough to act on; the count is in the figures.
    if (s.failures.length < 20) s.failures.push(what);
  }

  get inputs(): number {
    return Object.values(this.surfaces).reduce((n, s) => n + s.inputs, 0);
  }

  /** Prints the figures and writes them to `fuzz-report.json` in a temporary folder; returns its path. */
  write(): string {
    const dir = path.join(tmpdir(), `diffmesh-fuzz-${this.seed}-${process.pid}`);
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'fuzz-report.json');
    const json = {
      seed: this.seed,
      inputs: this.inputs,
      crashes: this.crashes,
      surfaces: this.surfaces,
      memory: this.memory,
      tensorBytes: this.tensorBytes,
    };
    writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
    const lines = [`fuzz run, seed ${this.seed}: ${this.inputs} inputs, ${this.crashes.length} crashes`];
    for (const c of this.crashes) lines.push(`  CRASH: ${c}`);
    for (const [name, s] of Object.entries(this.surfaces)) {
      const answers = Object.entries(s.answers)
        .sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `${k} ${n}`)
        .join(', ');
      lines.push(
        `  ${name}: ${s.inputs} inputs in ${(s.ms / 1000).toFixed(1)} s, ${s.normalRequests} normal requests beside them; answers: ${answers}`,
      );
      lines.push(
        `    made: ${Object.entries(s.made)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}`,
      );
      lines.push(
        `    ${Object.keys(s.targets).length} targets, each sent ${Math.min(...Object.values(s.targets))} to ${Math.max(...Object.values(s.targets))} inputs`,
      );
      for (const f of s.failures) lines.push(`    FAILURE: ${f}`);
    }
    if (this.memory)
      lines.push(
        `  memory (MiB, after GC): ${Object.entries(this.memory)
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', ')}`,
      );
    if (this.tensorBytes) lines.push(`  tensor-svc stored bytes: baseline ${this.tensorBytes.baseline}, after ${this.tensorBytes.after}`);
    lines.push(`  figures: ${file}`);
    process.stdout.write(`${lines.join('\n')}\n`);
    return file;
  }
}
