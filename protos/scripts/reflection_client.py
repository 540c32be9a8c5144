#!/usr/bin/env python3
"""A gRPC reflection client with no generated code: it learns diffmesh's API from a server.

It does what grpcurl and grpcio-reflection's ProtoReflectionDescriptorDatabase do, by hand
(Debian's python3-grpcio ships no grpc_reflection module): list the services, fetch the file
that defines the service, then each declared dependency by file name, build a descriptor
pool from those files, and make message classes with a message factory. Only the first file
of every answer is used, so the server's file names and dependency lists must be right.

    python3 reflection_client.py HOST:PORT [--api v1|v1alpha] [--request JSON] [--call]

Prints one JSON object: the services listed, the files fetched, a GenerateRequest built from
--request (proto JSON, camelCase or snake_case names) and, with --call, the answers of
SchedulerService.Generate decoded with the fetched descriptors. Needs grpcio and protobuf
(Debian: python3-grpcio python3-protobuf).
"""

import argparse
import base64
import json
import queue
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

SCHEDULER = "diffmesh.scheduler.v1.SchedulerService"
HTTP_RULE_EXTENSION = "google.api.http"


def message_class(pool, full_name):
    desc = pool.FindMessageTypeByName(full_name)
    get = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.22
    return get(desc) if get else message_factory.MessageFactory(pool).GetPrototype(desc)


def reflection_protocol(api):
    """The reflection messages of grpc/reflection/<api>/reflection.proto, built in code."""
    T = descriptor_pb2.FieldDescriptorProto
    pkg = "grpc.reflection." + api
    f = descriptor_pb2.FileDescriptorProto(name="reflection_client/%s.proto" % api, package=pkg, syntax="proto3")

    def message(name, *fields):
        m = f.message_type.add(name=name)
        for number, field_name, kind, extra in fields:
            field = m.field.add(name=field_name, number=number, type=kind, label=extra.get("label", T.LABEL_OPTIONAL))
            if "type_name" in extra:
                field.type_name = "." + pkg + "." + extra["type_name"]
            if "oneof" in extra:
                field.oneof_index = extra["oneof"]
        return m

    request = message(
        "ServerReflectionRequest",
        (1, "host", T.TYPE_STRING, {}),
        (3, "file_by_filename", T.TYPE_STRING, {"oneof": 0}),
        (4, "file_containing_symbol", T.TYPE_STRING, {"oneof": 0}),
        (5, "file_containing_extension", T.TYPE_MESSAGE, {"oneof": 0, "type_name": "ExtensionRequest"}),
        (6, "all_extension_numbers_of_type", T.TYPE_STRING, {"oneof": 0}),
        (7, "list_services", T.TYPE_STRING, {"oneof": 0}),
    )
    request.oneof_decl.add(name="message_request")
    message("ExtensionRequest", (1, "containing_type", T.TYPE_STRING, {}), (2, "extension_number", T.TYPE_INT32, {}))
    response = message(
        "ServerReflectionResponse",
        (1, "valid_host", T.TYPE_STRING, {}),
        (2, "original_request", T.TYPE_MESSAGE, {"type_name": "ServerReflectionRequest"}),
        (4, "file_descriptor_response", T.TYPE_MESSAGE, {"oneof": 0, "type_name": "FileDescriptorResponse"}),
        (6, "list_services_response", T.TYPE_MESSAGE, {"oneof": 0, "type_name": "ListServiceResponse"}),
        (7, "error_response", T.TYPE_MESSAGE, {"oneof": 0, "type_name": "ErrorResponse"}),
    )
    response.oneof_decl.add(name="message_response")
    message("FileDescriptorResponse", (1, "file_descriptor_proto", T.TYPE_BYTES, {"label": T.LABEL_REPEATED}))
    message("ListServiceResponse", (1, "service", T.TYPE_MESSAGE, {"label": T.LABEL_REPEATED, "type_name": "ServiceResponse"}))
    message("ServiceResponse", (1, "name", T.TYPE_STRING, {}))
    message("ErrorResponse", (1, "error_code", T.TYPE_INT32, {}), (2, "error_message", T.TYPE_STRING, {}))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_class(pool, pkg + ".ServerReflectionRequest"), message_class(pool, pkg + ".ServerReflectionResponse")


class Reflection:
    """One ServerReflectionInfo stream: a question, then its answer."""

    def __init__(self, channel, api):
        self.Request, Response = reflection_protocol(api)
        self._requests = queue.Queue()
        method = channel.stream_stream(
            "/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % api,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=Response.FromString,
        )
        self._answers = method(iter(self._requests.get, None), timeout=30)

    def ask(self, **request):
        self._requests.put(self.Request(**request))
        answer = next(self._answers)
        if answer.WhichOneof("message_response") == "error_response":
            e = answer.error_response
            raise LookupError("reflection %s: %s (code %d)" % (request, e.error_message, e.error_code))
        return answer

    def first_file(self, **request):
        files = self.ask(**request).file_descriptor_response.file_descriptor_proto
        return descriptor_pb2.FileDescriptorProto.FromString(files[0])

    def close(self):
        self._requests.put(None)


def resolve(reflection, symbol, files, order):
    """Fetches the file defining `symbol`, then every declared dependency by file name."""

    def fetch(name, fd=None):
        if name in files:
            return
        if fd is None:
            fd = reflection.first_file(file_by_filename=name)
        if fd.name != name:
            raise LookupError("asked for %s, got %s" % (name, fd.name))
        files[name] = fd
        for dep in fd.dependency:
            fetch(dep)
        order.append(name)  # dependencies first: the order a pool accepts

    fd = reflection.first_file(file_containing_symbol=symbol)
    fetch(fd.name, fd)


def http_rule(pool, method):
    """The google.api.http option of a method, read with the fetched google/api files: a
    MethodOptions class made from the fetched descriptor.proto knows the pool's extensions."""
    proto = descriptor_pb2.MethodDescriptorProto()
    method.CopyToProto(proto)
    MethodOptions = message_class(pool, "google.protobuf.MethodOptions")
    options = MethodOptions.FromString(proto.options.SerializeToString())
    rule = options.Extensions[pool.FindExtensionByName(HTTP_RULE_EXTENSION)]
    return json_format.MessageToDict(rule, preserving_proto_field_name=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("--api", choices=["v1", "v1alpha"], default="v1")
    parser.add_argument("--request", default='{"model": "tiny", "params": {"prompt": "a red circle"}}', help="GenerateRequest as proto JSON")
    parser.add_argument("--call", action="store_true", help="call SchedulerService.Generate and print its answers")
    args = parser.parse_args(argv)

    out = {}
    with grpc.insecure_channel(args.address) as channel:
        reflection = Reflection(channel, args.api)
        try:
            out["services"] = [s.name for s in reflection.ask(list_services="*").list_services_response.service]
            if SCHEDULER not in out["services"]:
                raise LookupError("%s is not served at %s" % (SCHEDULER, args.address))
            files, order = {}, []
            for service in out["services"]:
                resolve(reflection, service, files, order)
        finally:
            reflection.close()

        pool = descriptor_pool.DescriptorPool()
        for name in order:
            pool.Add(files[name])
        out["files"] = order

        service = pool.FindServiceByName(SCHEDULER)
        out["methods"] = [m.name for m in service.methods]
        generate = service.methods_by_name["Generate"]
        Request = message_class(pool, generate.input_type.full_name)
        request = json_format.ParseDict(json.loads(args.request), Request())
        out["request_type"] = generate.input_type.full_name
        out["json_names"] = {f.name: f.json_name for f in generate.input_type.fields}
        out["request"] = json_format.MessageToDict(request, preserving_proto_field_name=True)
        out["request_bytes"] = base64.b64encode(request.SerializeToString()).decode("ascii")
        out["http"] = http_rule(pool, generate)

        if args.call:
            Response = message_class(pool, generate.output_type.full_name)
            call = channel.unary_stream(
                "/%s/%s" % (SCHEDULER, generate.name),
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=Response.FromString,
            )
            out["responses"] = [json_format.MessageToDict(r, preserving_proto_field_name=True) for r in call(request, timeout=30)]
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (LookupError, grpc.RpcError) as err:
        print("reflection_client: %s" % err, file=sys.stderr)
        sys.exit(1)
