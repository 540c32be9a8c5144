import {
  checkDirectoryGraphs,
  layoutError,
  readDiffusersLayout,
  type DiffusersLayout,
  type DirectoryGraphs,
  type GraphIo,
  type GraphValue,
  type OnnxComponentName,
} from '@diffmesh/model-layout';
import type { ModelSession, SessionCache, SessionVariant } from './onnx-sessions.js';

/**
 * A model directory in the diffusers/optimum ONNX layout, loaded by a stage: its layout (kind,
 * configs, VAE factors) and the inputs and outputs of every graph, all checked when it opens,
 * plus the sessions of the components this stage runs (created once per process, from the
 * file's path, through the stage's SessionCache).
 */
export class LoadedModelDirectory {
  private constructor(
    readonly layout: DiffusersLayout,
    readonly graphs: DirectoryGraphs,
  ) {}

  /**
   * Reads and checks the whole directory (every JSON file and every graph's I/O; no weights).
   * Throws FAILED_PRECONDITION / MODEL_LOAD_FAILED naming the file and the input.
   */
  static async open(dir: string): Promise<LoadedModelDirectory> {
    const layout = await readDiffusersLayout(dir);
    return new LoadedModelDirectory(layout, await checkDirectoryGraphs(layout));
  }

  /** The model id of the directory: its absolute real path. */
  get id(): string {
    return this.layout.dir;
  }

  /** A component's graph I/O; FAILED_PRECONDITION when the directory has no such component. */
  io(component: OnnxComponentName): GraphIo {
    const io = this.graphs[component];
    if (!io) throw layoutError(this.layout.dir, `${component}/model.onnx`, 'missing');
    return io;
  }

  /** A graph input by name, or undefined. */
  input(component: OnnxComponentName, name: string): GraphValue | undefined {
    return this.graphs[component]?.inputs.find((i) => i.name === name);
  }

  /** A graph output by name, or undefined. */
  output(component: OnnxComponentName, name: string): GraphValue | undefined {
    return this.graphs[component]?.outputs.find((o) => o.name === name);
  }

  /**
   * The session of a component (one per process: the cache keys it by the file's real path),
   * or of a variant of its graph (see {@link SessionVariant}). The denoiser's (`unet`,
   * `transformer`) gets the pool's graph rewrites.
   */
  session(sessions: SessionCache, component: OnnxComponentName, variant?: SessionVariant): Promise<ModelSession> {
    const c = this.layout.components[component];
    if (!c) throw layoutError(this.layout.dir, `${component}/model.onnx`, 'missing');
    return sessions.get(c.model, { rewrite: component === 'unet' || component === 'transformer', variant });
  }
}
