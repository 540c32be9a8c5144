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
      "install a GPU provider's files into onnxruntime-node: with its own installer (from NuGet; needs network access), or from --from; files of another onnxruntime release are refused",
    )
    .argument('<provider>', "cuda or tensorrt (both in onnxruntime's Linux GPU build, for CUDA 13)")
    .option(
      '--from <path>',
      "the files, of onnxruntime-node's release: onnxruntime's onnxruntime-linux-x64-gpu-<version>.tgz, an npm package of them (tarball or folder), a .nupkg, or a folder holding them",
    )
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
