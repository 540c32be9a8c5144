import type { CommandDefinition } from './command-definition.js';

/** `diffmesh status`. */
export const statusCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description('list the services registered in NATS (name, version, pool, node, load)')
    .option('--nats <url>', 'NATS server (default: the mesh `diffmesh up` started on this machine)')
    .option('--json', 'print JSON')
    .action(async (flags: { nats?: string; json?: boolean }) => {
      const { runStatus } = await import('../mesh/status.js');
      exit(await runStatus(flags));
    });
};
