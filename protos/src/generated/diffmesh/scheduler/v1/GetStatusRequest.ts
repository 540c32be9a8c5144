// Original file: proto/diffmesh/scheduler/v1/scheduler.proto


export interface GetStatusRequest {
}

export interface GetStatusRequest__Output {
}
