#!/bin/sh
# The whole test suite: installs what is missing, builds, runs every test
# (unit, service, faults, sharding, under valgrind too, Python client,
# generated code, bench smoke run), builds the programs as Release (-O3
# warns of more), then builds again with AddressSanitizer
# and UBSan and runs the tests once more (valgrind runs excluded; the RSS
# checks skip themselves there), then fuzzes the request path for 60 s
# (tests/fuzz.sh, clang and libFuzzer).
# Usage: sh tests/run.sh [ctest arguments...]
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps test
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"
(cd build && ctest --output-on-failure "$@")
# Release (-O3) warns where -O2 does not, and warnings are errors: build
# the programs that way too.
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release
cmake --build build-release -j "$(nproc)" --target rankd rankctl rank-bench
cmake -S . -B build-asan -DRANKD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
cmake --build build-asan -j "$(nproc)"
(cd build-asan &&
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --output-on-failure -E valgrind "$@")
sh tests/fuzz.sh
