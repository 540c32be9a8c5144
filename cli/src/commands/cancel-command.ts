import type { CommandDefinition } from './command-definition.js';
import { remoteOption } from './shared-options.js';

/** `diffmesh cancel REQ-ID`. */
export const cancelCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description('cancel a request in a running mesh: its running stage stops and its tensors are deleted')
    .argument('<req-id>', 'the request id')
    .option('--reason <text>', 'recorded in the request and sent to its watchers', 'cancelled from the command line')
    .addOption(remoteOption())
    .action(async (reqId: string, flags: { remote: string; reason: string }) => {
      const { runCancel } = await import('../request-runs.js');
      exit(await runCancel(reqId, flags));
    });
};
