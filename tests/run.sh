#!/bin/sh
# The whole test suite: installs what is missing, builds, runs every test
# (unit, service, service under valgrind, Python client, generated code).
# Usage: sh tests/run.sh [ctest arguments...]
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
cd build
exec ctest --output-on-failure "$@"
