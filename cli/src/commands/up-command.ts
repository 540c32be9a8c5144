import { upOptions, type UpFlags } from '../mesh/up-config.js';
import type { CommandDefinition } from './command-definition.js';

/** `diffmesh up`: its flags, env variables and help from `UpConfigSchema` (mesh/up-config.ts). */
export const upCommand: CommandDefinition = (cmd, exit) => {
  cmd.description('start a local mesh: nats-server and every service as its own process (Ctrl-C stops it)');
  for (const option of upOptions().options) cmd.addOption(option);
  cmd.action(async (flags: UpFlags) => {
    const { runUp } = await import('../mesh/up.js');
    exit(await runUp(flags));
  });
};
