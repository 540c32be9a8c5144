import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { ExecutionPlan as _diffmesh_common_v1_ExecutionPlan, ExecutionPlan__Output as _diffmesh_common_v1_ExecutionPlan__Output } from './diffmesh/common/v1/ExecutionPlan.js';
import type { PlanStage as _diffmesh_common_v1_PlanStage, PlanStage__Output as _diffmesh_common_v1_PlanStage__Output } from './diffmesh/common/v1/PlanStage.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  diffmesh: {
    common: {
      v1: {
        ExecutionPlan: MessageTypeDefinition<_diffmesh_common_v1_ExecutionPlan, _diffmesh_common_v1_ExecutionPlan__Output>
        PlanStage: MessageTypeDefinition<_diffmesh_common_v1_PlanStage, _diffmesh_common_v1_PlanStage__Output>
        StageName: EnumTypeDefinition
      }
    }
  }
}

