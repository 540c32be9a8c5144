// Original file: proto/diffmesh/stage/v1/stage.proto


export interface DescribeRequest {
}

export interface DescribeRequest__Output {
}
