#!/usr/bin/env bash
# Generates Python stubs for diffmesh's gRPC API from protos/ into examples/python/gen/
# (or the folder given as $1), with protoc and the gRPC Python plugin.
#   Debian/Ubuntu: sudo apt-get install protobuf-compiler protobuf-compiler-grpc libprotobuf-dev python3-grpcio python3-protobuf
#   (libprotobuf-dev brings google/protobuf/*.proto; elsewhere set PROTOC_INCLUDE to the folder that holds them)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
protos=$(cd "$here/../../protos/proto" && pwd)
out=${1:-$here/gen}
plugin=${GRPC_PYTHON_PLUGIN:-$(command -v grpc_python_plugin || echo /usr/bin/grpc_python_plugin)}
mkdir -p "$out"
cd "$protos"
protoc -I . -I third_party -I "${PROTOC_INCLUDE:-/usr/include}" --python_out="$out" --grpc_python_out="$out" --plugin=protoc-gen-grpc_python="$plugin" \
  $(find diffmesh -name '*.proto' | sort) \
  google/api/annotations.proto google/api/http.proto google/rpc/code.proto google/rpc/status.proto google/rpc/error_details.proto
