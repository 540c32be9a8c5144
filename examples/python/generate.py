#!/usr/bin/env python3
"""Generates an image (or video) through a diffmesh mesh and writes the encoded file.

Uses stubs generated from diffmesh's protos (run ./gen-stubs.sh first):

    python3 generate.py "a red circle on a blue background" --address 127.0.0.1:PORT --seed 7 -o out.png

It calls SchedulerService.Generate, prints the request's progress, then fetches the
finished result already encoded with SchedulerService.GetResult (the format follows the
output file's extension: .png .jpg .webp for a picture, .mp4 .webm .gif for a video).
"""

import argparse
import os
import sys

sys.path.insert(0, os.environ.get("DIFFMESH_PY_STUBS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen")))

import grpc  # noqa: E402
from diffmesh.common.v1 import request_pb2  # noqa: E402
from diffmesh.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc  # noqa: E402

FORMATS = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp", ".mp4": "mp4", ".webm": "webm", ".gif": "gif"}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("prompt")
    p.add_argument("--address", default="127.0.0.1:50051", help="a scheduler's gRPC host:port")
    p.add_argument("--model", default="diffmesh/tiny-shapes")
    p.add_argument("--seed", type=int)
    p.add_argument("--steps", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--frames", type=int)
    p.add_argument("-o", "--output", default="out.png")
    args = p.parse_args()

    ext = os.path.splitext(args.output)[1].lower()
    if ext not in FORMATS:
        sys.exit("generate.py: unsupported output extension %r; use %s" % (ext, ", ".join(FORMATS)))
    params = request_pb2.GenerationParams(prompt=args.prompt)
    for field, value in (("seed", args.seed), ("num_inference_steps", args.steps), ("width", args.width),
                         ("height", args.height), ("num_frames", args.frames)):
        if value is not None:
            setattr(params, field, value)

    with grpc.insecure_channel(args.address) as channel:
        scheduler = scheduler_pb2_grpc.SchedulerServiceStub(channel)
        req_id = None
        try:
            for response in scheduler.Generate(scheduler_pb2.GenerateRequest(model=args.model, params=params)):
                for event in response.events:
                    req_id = event.req_id
                    kind = event.WhichOneof("kind")
                    if kind == "step_progress":
                        print("step %d/%d" % (event.step_progress.step, event.step_progress.total_steps), file=sys.stderr)
                    elif kind == "failed":
                        sys.exit("generate.py: request failed: %s" % event.failed.error.message)
                    elif kind == "cancelled":
                        sys.exit("generate.py: request cancelled")
            header = None
            with open(args.output, "wb") as out:
                for part in scheduler.GetResult(scheduler_pb2.GetResultRequest(req_id=req_id, format=FORMATS[ext])):
                    if part.WhichOneof("part") == "header":
                        header = part.header
                    else:
                        out.write(part.chunk)
        except grpc.RpcError as err:
            sys.exit("generate.py: %s: %s" % (err.code().name, err.details()))
    print("wrote %s (%s, %d bytes, %dx%d, %d frame%s; request %s)" % (
        args.output, header.media_type, header.size_bytes, header.width, header.height, header.frames,
        "" if header.frames == 1 else "s", req_id))


if __name__ == "__main__":
    main()
