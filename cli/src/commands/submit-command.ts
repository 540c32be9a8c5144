import type { CommandDefinition } from './command-definition.js';
import { remoteOption, withGenerationOptions, type SubmitFlags } from './shared-options.js';

/** `diffmesh submit PROMPT`. */
export const submitCommand: CommandDefinition = (cmd, exit) => {
  withGenerationOptions(
    cmd
      .description('start a request in a running mesh and print its id without waiting (follow it with `watch`)')
      .argument('<prompt>', 'what to generate'),
  )
    .addOption(remoteOption())
    .option('--request-id <id>', 'your own id for the request; submitting it again returns the same request')
    .option('--timeout-ms <ms>', "fail the request if it has not finished after this long (default: the scheduler's)")
    .option('--json', 'print the answer as JSON on stdout')
    .action(async (prompt: string, flags: SubmitFlags) => {
      const { runSubmit } = await import('../request-runs.js');
      exit(await runSubmit(prompt, flags));
    });
};
