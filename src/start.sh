#!/bin/sh
# Quick start: installs what building and running need (not the test
# tools: tests/run.sh adds those), builds rankd and rankctl, and starts rankd
# on 127.0.0.1:9090 with its embedded Redis in ./rankd-data.
# Usage: sh src/start.sh [rankd options...]   (see: build/rankd --help)
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps run
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target rankd rankctl
exec build/rankd "$@"
