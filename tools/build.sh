#!/usr/bin/env bash
# Configures and builds MegaTrain into build/ (binaries in build/bin). Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build --parallel "$(nproc)"
