import type { GenerationParams, ObjectRef, StageName, StageTask } from '@diffmesh/core';

/** What a test's stage task names; the rest has defaults. */
export interface TestStageTask {
  reqId: string;
  model: string;
  stage: StageName;
  stageIndex?: number;
  /** Over the defaults: 64×64, one frame, 6 steps, guidance 3.5, seed 1, 8 fps, prompt "x". */
  params?: Partial<GenerationParams>;
  inputs: Record<string, ObjectRef>;
}

/** A stage task of tests, as the scheduler sends one: first attempt, no deadline, no trace. */
export function testStageTask(t: TestStageTask): StageTask {
  return {
    reqId: t.reqId,
    stageIndex: t.stageIndex ?? 0,
    stage: t.stage,
    attempt: 1,
    model: t.model,
    params: {
      prompt: 'x',
      negativePrompt: '',
      width: 64,
      height: 64,
      numFrames: 1,
      numInferenceSteps: 6,
      guidanceScale: 3.5,
      seed: '1',
      fps: 8,
      ...t.params,
    },
    inputs: t.inputs,
    deadline: 0,
    traceContext: {},
  };
}
