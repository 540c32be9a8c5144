import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEPLOY_DIR } from './run.js';
import { checkStageFields, compareWithStageSchema } from './stage-fields.js';

describe('stage options in the chart and the CRD', () => {
  it('match the stage schema: the pool and stage fields named like its fields have its types and values', () => {
    const section = checkStageFields(path.join(DEPLOY_DIR, 'helm', 'diffmesh'));
    expect(section.problems).toEqual([]);
    // The fields that appear in all three places are compared, not skipped.
    for (const line of section.passed) expect(line).toMatch(/capacity.*runnerThreads/);
    expect(section.passed.length).toBe(3);
  });

  it('names a field whose type or values differ from the schema', () => {
    const r = compareWithStageSchema('values.pools.*', {
      runnerThreads: { type: 'string' },
      warmup: { type: 'string', enum: ['auto', 'always'] },
      executionProviders: { type: 'array', items: { type: 'string', enum: ['cpu', 'tpu'] } },
      replicas: { type: 'string' },
    });
    expect(r.problems).toEqual([
      "values.pools.*.runnerThreads: type string, but the stage schema's runnerThreads is integer",
      'values.pools.*.warmup: "always" is not a value the stage services take',
      'values.pools.*.executionProviders: "tpu" is not a value the stage services take',
    ]);
    // Not a stage option (the chart's own): not compared.
    expect(r.checked).not.toContain('replicas');
  });
});
