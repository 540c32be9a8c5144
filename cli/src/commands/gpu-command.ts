import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { CommandDefinition } from './command-definition.js';

/** `diffmesh gpu check|install|adapter`. */
export const gpuCommand: CommandDefinition = (gpu, exit) => {
  gpu.description('GPU execution providers: what this machine has, and the opt-in CUDA/TensorRT install');
  gpu
    .command('check')
    .description(
      'list the execution providers onnxruntime-node has here, whether each loads and runs (and runs float16), the files and libraries CUDA/TensorRT lack, and the WebGPU adapter',
    )
    .option('--json', 'print the report as JSON')
    .option('--require <list>', 'exit 1 unless these providers work here, e.g. webgpu or cuda')
    .action(async (flags: { json?: boolean; require?: string }) => {
      const { runGpuCheck } = await import('../gpu.js');
      exit(await runGpuCheck(cliPath(), flags));
    });
  gpu
    .command('install')
    .description(
      "install a GPU provider's files into onnxruntime-node with its own installer (from NuGet; needs network access), or from a downloaded .nupkg",
    )
    .argument('<provider>', "cuda or tensorrt (both come in onnxruntime-node 1.30's CUDA 12 package)")
    .option('--from <file.nupkg>', 'the NuGet package, already downloaded (Microsoft.ML.OnnxRuntime.Gpu.Linux of the same version)')
    .action(async (provider: string, flags: { from?: string }) => {
      const { runGpuInstall } = await import('../gpu.js');
      exit(await runGpuInstall(provider, flags));
    });
  gpu
    .command('adapter')
    .description('print the WebGPU adapter Dawn finds here: vendor, architecture, shader-f16 (needs the optional package "webgpu")')
    .option('--json', 'print JSON')
    .action(async (flags: { json?: boolean }) => {
      const { runGpuAdapter } = await import('../gpu.js');
      exit(await runGpuAdapter(flags));
    });
};

/** This command's script (for `gpu check`'s child process): the package's bin, or what this process runs. */
function cliPath(): string {
  const bin = fileURLToPath(new URL('../../bin/diffmesh.js', import.meta.url));
  return existsSync(bin) ? bin : (process.argv[1] ?? bin);
}
