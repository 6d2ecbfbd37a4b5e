#!/usr/bin/env bash
# NaN/Inf in the loss or the gradients: the update is never applied; by default the run stops
# naming the first offending gradient (exit 1), with --on-nonfinite skip it skips the step. Weights
# that are not finite are refused at load, naming the tensor.
# usage: nonfinite.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
for i in $(seq 1 200); do echo "$i: a bad weight poisons everything"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtc" gpt2-tiny --batch 2 --seq 16 -o m.plan >/dev/null
# One weight of the initial weights set to NaN (refused at load), and one to 3e38, finite but so
# large that the forward overflows (NaN/Inf loss and gradients). Edited bytes would fail their
# checksums: the files are made without them, as files from elsewhere.
PYTHONPATH="$e2e_dir" /usr/bin/python3 - <<'PY'
import json, math, struct
from same_tensors import strip_checksums
strip_checksums("m.safetensors")
data = bytearray(open("m.safetensors", "rb").read())
(n,) = struct.unpack("<Q", data[:8])
begin = json.loads(data[8:8 + n])["blocks.1.mlp.fc.weight"]["data_offsets"][0]
for name, value in (("nan", math.nan), ("huge", 3.0e38)):
    data[8 + n + begin:8 + n + begin + 4] = struct.pack("<f", value)
    open(name + ".safetensors", "wb").write(data)
PY
err=$("$bin/mtrun" m.plan --data corpus.tok --weights nan.safetensors --steps 5 2>&1 >/dev/null); status=$?
check "a NaN weight is refused at load (exit $status), naming the tensor" \
  "[ $status -eq 1 ] && grep -q \"tensor 'blocks.1.mlp.fc.weight' holds a value that is not finite\" <<<\"\$err\""
err=$("$bin/mtrun" m.plan --data corpus.tok --weights huge.safetensors --steps 5 2>&1 >/dev/null); status=$?
check "stops with exit 1 (got $status)" "[ $status -eq 1 ]"
check "names the step and the first non-finite gradient" "grep -q \"step 1: the loss is -\\?nan\\|step 1: the gradient '.*' holds NaN or Inf\" <<<\"\$err\""
out=$("$bin/mtrun" m.plan --data corpus.tok --weights huge.safetensors --steps 3 --on-nonfinite skip \
        --export out.safetensors 2>&1); status=$?
check "skip mode finishes (exit $status)" "[ $status -eq 0 ] && [ \$(grep -c 'skipped:' <<<\"\$out\") -eq 3 ]"
check "skipped steps leave the weights untouched (byte for byte)" "same_tensors huge.safetensors out.safetensors"
finish
