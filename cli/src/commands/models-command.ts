import type { CommandDefinition } from './command-definition.js';
import { remoteOption } from './shared-options.js';

/** `diffmesh models`. */
export const modelsCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description('list the models of a running mesh: which it can serve now, and which are only registered plans')
    .addOption(remoteOption())
    .option('--json', 'print the list as JSON on stdout')
    .action(async (flags: { remote: string; json?: boolean }) => {
      const { runModels } = await import('../request-runs.js');
      exit(await runModels(flags));
    });
};
