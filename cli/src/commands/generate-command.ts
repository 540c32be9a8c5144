import { Option } from 'commander';
import type { CommandDefinition } from './command-definition.js';
import { ffmpegOption, logLevelOption, modelsDirOption, withGenerationOptions, type GenerateFlags } from './shared-options.js';

/** `diffmesh generate PROMPT`. */
export const generateCommand: CommandDefinition = (cmd, exit) => {
  withGenerationOptions(
    cmd
      .description(
        'generate an image or video: in this process (embedded runtime, nothing external), or through a running mesh with --remote',
      )
      .argument('<prompt>', 'what to generate, e.g. "a red circle on a blue background"')
      .option('-o, --output <file>', 'output file: .png for an image; .mp4 (ffmpeg), .gif or .apng for a video'),
  )
    .option('--remote <address>', "run through a mesh: the scheduler's gRPC host:port ('local' = the mesh `diffmesh up` started)")
    .option('--preview-dir <dir>', 'write live previews of the picture as it forms (small PNGs, step-NNN.png) into this folder')
    .option('--preview-every <n>', 'with --preview-dir: a preview every this many denoising steps (default 1)')
    .option(
      '--lora-dir <folder>',
      'embedded: the folder of the LoRA adapters --lora names (default: $DIFFMESH_LORA_DIR, else ~/.diffmesh/loras)',
    )
    .addOption(modelsDirOption())
    .addOption(new Option('--plans <file>', 'ExecutionPlan registry file').env('DIFFMESH_PLANS_FILE'))
    .addOption(
      new Option(
        '--execution-providers <list>',
        'embedded: onnxruntime execution providers in order of preference (cpu, cuda, tensorrt, coreml, dml, webgpu)',
      )
        .env('DIFFMESH_EXECUTION_PROVIDERS')
        .default('cpu'),
    )
    .addOption(new Option('--threads <n>', 'onnxruntime threads per model run (0 = auto)').env('DIFFMESH_THREADS').default('0'))
    .addOption(ffmpegOption())
    .addOption(logLevelOption())
    .option('--no-progress', 'no progress bar')
    .option('--json', 'print the result as JSON on stdout')
    .action(async (prompt: string, flags: GenerateFlags) => {
      const { runGenerate } = await import('../run-generate.js');
      exit(await runGenerate(prompt, flags));
    });
};
