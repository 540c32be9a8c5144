import { EXIT } from '../exit-codes.js';
import type { PlanPoolsFlags } from '../plan-pools.js';
import type { CommandDefinition } from './command-definition.js';

/** `diffmesh plan-pools`. */
export const planPoolsCommand: CommandDefinition = (cmd, exit) => {
  cmd
    .description(
      'propose stage pool sizes from measured stage costs and a target rate or a GPU budget, and compare with the whole pipeline on every GPU',
    )
    .option(
      '--stage <spec>',
      'a stage: name=NAME[,pool=POOL][,fixed-ms=MS][,per-item-ms=MS][,steps=N][,max-batch=N]; task cost = steps × (fixed-ms + per-item-ms × batch) (repeatable)',
      (spec: string, list: string[]) => [...list, spec],
      [] as string[],
    )
    .option('--costs <file>', 'stages from a YAML/JSON file: a list (or { stages: [...] }) of objects with the --stage keys')
    .option('--example <name>', "a built-in scenario: wan-14b (the design's Wan-14B text-to-video on 32 H100s)")
    .option('--rate <n>', 'target rate: requests per minute (12, 12/min, 0.5/s, 600/h)')
    .option('--gpus <n>', 'GPU budget: workers to split between the pools')
    .option('--utilisation <x>', 'highest planned utilisation of a worker, in (0, 1] (queueing headroom)', '0.8')
    .option('--steps <n>', 'denoising steps (sets steps of the "denoising" stage)')
    .option('--whole-batch <n>', 'batch a whole-pipeline worker runs each stage at, capped by its max-batch', '1')
    .option('--json', 'print the plan as JSON')
    .action(async (flags: PlanPoolsFlags) => {
      const { planPoolsCommand: run, PlanPoolsUsageError } = await import('../plan-pools.js');
      try {
        await run(flags, process.stdout);
        exit(EXIT.ok);
      } catch (err) {
        if (!(err instanceof PlanPoolsUsageError)) throw err;
        process.stderr.write(`diffmesh: plan-pools: ${err.message} (${err.flag})\n`);
        exit(EXIT.usage);
      }
    });
};
