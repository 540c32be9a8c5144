import { GraphIndex, type ModelProto } from './onnx-model.js';

/** A node a pass found but could not rewrite, and why. */
export interface PassRefusal {
  /** The node's name in the graph (as the exporter left it). */
  node: string;
  reason: string;
}

/** What one pass did to a model. */
export interface PassReport {
  pass: string;
  /** Patterns rewritten (attention blocks fused, weights quantized, …). */
  rewritten: number;
  /** Patterns found but left as they were, by node name. */
  refused: PassRefusal[];
}

/**
 * One rewrite of an ONNX model, done once when a session is made: a function of the model that
 * changes it in place through a {@link GraphIndex} and says what it did. A pass leaves whatever
 * it cannot map as it was and names it in `refused`; it never changes the numbers beyond its
 * documented tolerance.
 */
export interface GraphPass {
  /** Short name, as options and logs spell it (`fuse-attention`, `int4-weights`). */
  readonly name: string;
  run(graph: GraphIndex): Omit<PassReport, 'pass'>;
}

/**
 * Runs passes in order over a model (in place) and reports each. Each pass sees the graph the
 * previous one left (the index is rebuilt between passes).
 */
export function runGraphPasses(model: ModelProto, passes: readonly GraphPass[]): PassReport[] {
  const reports: PassReport[] = [];
  for (const pass of passes) {
    const index = new GraphIndex(model);
    const r = pass.run(index);
    index.commit();
    reports.push({ pass: pass.name, ...r });
  }
  return reports;
}
