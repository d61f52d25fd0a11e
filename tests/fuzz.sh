#!/bin/sh
# Builds the libFuzzer target with clang into build-fuzz/ and runs it from
# its seed corpus for FUZZ_SECONDS (default 60). Any crash, hang (a
# connection rankd keeps open), leak or sanitizer report fails it; the input
# that caused it is kept in build-fuzz/ (crash-*, leak-*, timeout-*).
# Usage: sh tests/fuzz.sh
set -eu
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
CC=clang cmake -S . -B build-fuzz -DRANKD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug
cmake --build build-fuzz -j "$(nproc)" --target fuzz_request fuzz_seeds
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
build-fuzz/tests/fuzz_seeds "$corpus"
# Inputs that once failed, replayed first (tests/fuzz/regressions/).
cp tests/fuzz/regressions/*-* "$corpus"/
ASAN_OPTIONS=detect_leaks=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  build-fuzz/tests/fuzz_request -max_total_time="$seconds" -timeout=30 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=build-fuzz/ \
    "$corpus"
