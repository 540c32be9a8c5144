import { Command, CommanderError } from 'commander';
import { EXIT } from './exit-codes.js';
import { printVersion } from './version.js';
import type { CommandDefinition } from './commands/command-definition.js';

export { EXIT } from './exit-codes.js';

/**
 * The commands, each by name with the one line `diffmesh --help` shows, and the module that
 * defines its flags and runs it. Only the module of the command being run is loaded: the
 * others (and the packages they need: the redis client, protobuf descriptors, onnxruntime)
 * cost a `diffmesh --help` or a remote `generate` nothing.
 */
const COMMANDS: readonly { name: string; usage: string; summary: string; load(): Promise<CommandDefinition> }[] = [
  {
    name: 'generate',
    usage: '[options] <prompt>',
    summary: 'generate an image or video: in this process (embedded runtime, nothing external), or through a running mesh with --remote',
    load: async () => (await import('./commands/generate-command.js')).generateCommand,
  },
  {
    name: 'submit',
    usage: '[options] <prompt>',
    summary: 'start a request in a running mesh and print its id without waiting (follow it with `watch`)',
    load: async () => (await import('./commands/submit-command.js')).submitCommand,
  },
  {
    name: 'watch',
    usage: '[options] <req-id>',
    summary: 'follow a request in a running mesh until it ends, optionally writing its result',
    load: async () => (await import('./commands/watch-command.js')).watchCommand,
  },
  {
    name: 'cancel',
    usage: '[options] <req-id>',
    summary: 'cancel a request in a running mesh: its running stage stops and its tensors are deleted',
    load: async () => (await import('./commands/cancel-command.js')).cancelCommand,
  },
  {
    name: 'models',
    usage: '[options]',
    summary: 'list the models of a running mesh: which it can serve now, and which are only registered plans',
    load: async () => (await import('./commands/models-command.js')).modelsCommand,
  },
  {
    name: 'up',
    usage: '[options]',
    summary: 'start a local mesh: nats-server and every service as its own process (Ctrl-C stops it)',
    load: async () => (await import('./commands/up-command.js')).upCommand,
  },
  {
    name: 'status',
    usage: '[options]',
    summary: 'list the services registered in NATS (name, version, pool, node, load)',
    load: async () => (await import('./commands/status-command.js')).statusCommand,
  },
  {
    name: 'plan-pools',
    usage: '[options]',
    summary: 'propose stage pool sizes from measured stage costs and a target rate or a GPU budget',
    load: async () => (await import('./commands/plan-pools-command.js')).planPoolsCommand,
  },
  {
    name: 'gpu',
    usage: '<check|install|adapter> [options]',
    summary: 'GPU execution providers: what this machine has, and the opt-in CUDA/TensorRT install',
    load: async () => (await import('./commands/gpu-command.js')).gpuCommand,
  },
  {
    name: 'adapters',
    usage: '<list|add|remove> [options]',
    summary: 'LoRA adapters (.safetensors, diffusers/PEFT or kohya) in the folder a denoising stage serves',
    load: async () => (await import('./commands/adapters-command.js')).adaptersCommand,
  },
];

/** Runs the `diffmesh` command with `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  if (argv[0] === '--version' || argv[0] === '-V') return printVersion(argv.slice(1).includes('--json'));
  const program = new Command('diffmesh')
    .description('diffmesh: serve diffusion models as a mesh of gRPC services')
    .option('-V, --version', 'print the version (with --json: the versions of diffmesh, onnxruntime-node and Node)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  let code: number = EXIT.ok;
  const wanted = argv[0] === 'help' ? argv[1] : argv[0];
  for (const entry of COMMANDS) {
    const cmd = program.command(entry.name);
    if (entry.name !== wanted) {
      // Listed in `diffmesh --help` only; never run (another command was asked for).
      cmd.usage(entry.usage).description(entry.summary);
      continue;
    }
    const definition = await entry.load();
    definition(cmd, (c) => (code = c));
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    throw err;
  }
  return code;
}
