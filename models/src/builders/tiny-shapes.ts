/** Builds `diffmesh/tiny-shapes` into `outDir` (written by the lead; placeholder). */
export async function buildTinyShapes(outDir: string): Promise<void> {
  throw new Error(`tiny-shapes builder not written yet (${outDir})`);
}
