#!/usr/bin/env bash
# Builds MegaTrain and runs every test (unit, golden IR, sanitizer, PyTorch parity, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)"
