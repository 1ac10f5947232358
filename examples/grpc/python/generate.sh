#!/bin/sh
# Generates the Python stubs of sluice's gRPC API from proto/sluice/v1/sluice.proto:
# sluice/v1/sluice_pb2.py (the messages), sluice_pb2.pyi (their types, for editors) and
# sluice_pb2_grpc.py (the client stub), in OUT_DIR (default: generated/ beside this script).
#
#   ./generate.sh [OUT_DIR]
#
# Runs `python -m grpc_tools.protoc` with the Python of $PYTHON, or `python3` (in an activated
# venv, the venv's). The stubs import each other as `sluice.v1....`: put OUT_DIR on the Python
# path (client.py looks in generated/ beside itself, after PYTHONPATH).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/generated}
mkdir -p "$out"

"${PYTHON:-python3}" -m grpc_tools.protoc \
    --proto_path="$here/../../../proto" \
    --python_out="$out" \
    --pyi_out="$out" \
    --grpc_python_out="$out" \
    sluice/v1/sluice.proto

echo "generated the stubs of sluice/v1/sluice.proto in $out"
