#!/usr/bin/env bash
# Runs one golden IR test: mt-opt with the passes named on the file's "// PASSES:" line, each
# "// -----" section on its own, expected diagnostics verified, output checked by FileCheck.
# usage: run_golden.sh MT_OPT FILECHECK TEST.mlir
set -euo pipefail
mt_opt=$1 filecheck=$2 test=$3
passes=$(sed -n 's|^// PASSES: ||p' "$test" | head -1)
[ -n "$passes" ] || { echo "$test has no // PASSES: line" >&2; exit 2; }
# eval: a pass's options may be quoted on the PASSES line ("--mt-x=\"a=1 b=2\"").
eval "\"\$mt_opt\" \"\$test\" $passes --split-input-file --verify-diagnostics" | "$filecheck" "$test"
