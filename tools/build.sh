#!/usr/bin/env bash
# Configures and builds MegaTrain into build/ (binaries in build/bin). Extra arguments go to CMake.
# MT_BUILD_TARGETS="mtc mtrun" builds only those targets (and what they need): the demo builds
# its four tools, not the test and sanitizer binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# shellcheck disable=SC2086
cmake --build build --parallel "$(nproc)" ${MT_BUILD_TARGETS:+--target $MT_BUILD_TARGETS}
