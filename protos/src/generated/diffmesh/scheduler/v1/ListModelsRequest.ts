// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface ListModelsRequest {
}

export interface ListModelsRequest__Output {
}
