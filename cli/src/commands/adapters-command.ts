import { Option } from 'commander';
import type { CommandDefinition } from './command-definition.js';
import { defaultLoraDir } from './lora-options.js';

function dirOption(): Option {
  return new Option('--dir <folder>', 'the adapter folder (a denoising stage serves it with --lora-dir)')
    .env('DIFFMESH_LORA_DIR')
    .default(defaultLoraDir());
}

/** `diffmesh adapters list|add|remove`: the folder of LoRA files a denoising stage serves (`dit-svc --lora-dir`). */
export const adaptersCommand: CommandDefinition = (cmd, exit) => {
  cmd.description('LoRA adapters (.safetensors, diffusers/PEFT or kohya) in the folder a denoising stage serves');
  cmd
    .command('list')
    .description('the adapters in the folder: name, size, layout, base models, layers, ranks')
    .addOption(dirOption())
    .option('--json', 'print JSON')
    .action(async (flags: { dir: string; json?: boolean }) => {
      const { runAdaptersList } = await import('../adapters.js');
      exit(await runAdaptersList(flags));
    });
  cmd
    .command('add')
    .description('check a LoRA file and copy it into the folder (under its file name, or --name)')
    .argument('<file>', 'a .safetensors LoRA file')
    .option('--name <name>', 'the name requests give (default: the file name without .safetensors)')
    .option('--max-bytes <n>', 'largest file accepted (default: what a denoising stage reads, 256 MiB)')
    .addOption(dirOption())
    .action(async (file: string, flags: { dir: string; name?: string; maxBytes?: string }) => {
      const { runAdaptersAdd } = await import('../adapters.js');
      exit(await runAdaptersAdd(file, flags));
    });
  cmd
    .command('remove')
    .description('remove an adapter from the folder')
    .argument('<name>', 'the adapter')
    .addOption(dirOption())
    .action(async (name: string, flags: { dir: string }) => {
      const { runAdaptersRemove } = await import('../adapters.js');
      exit(await runAdaptersRemove(name, flags));
    });
};
