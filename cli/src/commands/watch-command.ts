import type { CommandDefinition } from './command-definition.js';
import { ffmpegOption, logLevelOption, remoteOption, type WatchFlags } from './shared-options.js';

/** `diffmesh watch REQ-ID`. */
export const watchCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description(
      'follow a request in a running mesh until it ends (from its first event), optionally writing its result; Ctrl-C stops watching, not the request',
    )
    .argument('<req-id>', 'the request id `submit` printed')
    .option('-o, --output <file>', 'write the result here once the request completes (.png; .mp4, .gif or .apng for a video)')
    .option('--fps <n>', "frames per second of a video file (default: the model's)")
    .addOption(remoteOption())
    .addOption(ffmpegOption())
    .addOption(logLevelOption())
    .option('--no-progress', 'no progress bar')
    .option('--json', 'print the outcome as JSON on stdout')
    .action(async (reqId: string, flags: WatchFlags) => {
      const { runWatch } = await import('../request-runs.js');
      exit(await runWatch(reqId, flags));
    });
};
