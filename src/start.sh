#!/bin/sh
# Quick start: installs what is missing, builds, and starts rankd on
# 127.0.0.1:9090 with its embedded Redis in ./rankd-data.
# Usage: sh src/start.sh [rankd options...]   (see: build/rankd --help)
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"
exec build/rankd "$@"
