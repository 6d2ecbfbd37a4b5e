#!/usr/bin/env bash
# The same plans on the CUDA and the CPU backend: 10 steps of GPT-2 and Llama (GQA), resident
# and streamed-recompute under a small device budget, give the same losses (fp32: relative
# 1e-4; the GPU sums in another order) and the same weights (1e-3 relative, after 10 AdamW
# steps). Exits 77 (ctest: skipped) where no GPU is usable, saying why.
# usage: cuda_parity.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
printf 'hello world, this is a small corpus for the tests.\n%.0s' {1..300} > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtc" llama-tiny --batch 2 --seq 32 --no-weights -o probe.plan >/dev/null
if ! probe=$("$bin/mtrun" probe.plan --data corpus.tok --steps 1 --backend cuda 2>&1); then
  echo "skipped: $probe"
  exit 77
fi
source "$(dirname "$0")/check.sh"
for model in gpt2-tiny llama-tiny; do
  for budget in "" "--device-mem 1300KiB"; do
    name=$model${budget:+-streamed}
    "$bin/mtc" $model --batch 4 --seq 32 $budget -o $name.plan >/dev/null
    for backend in cpu cuda; do
      "$bin/mtrun" $name.plan --data corpus.tok --steps 10 --backend $backend --log $name.$backend.jsonl \
        --export $name.$backend.safetensors --print-every 100 >/dev/null
    done
    check "$name: losses and weights on cuda match the cpu's" "/usr/bin/python3 - $name <<'PY'
import json, sys
sys.path.insert(0, '$(dirname "$0")')
import mt_reference as ref
name = sys.argv[1]
losses = [[json.loads(l)['loss'] for l in open(f'{name}.{b}.jsonl')] for b in ('cpu', 'cuda')]
worst = max(abs(a - b) / abs(a) for a, b in zip(*losses))
weights = [ref.read_safetensors(f'{name}.{b}.safetensors') for b in ('cpu', 'cuda')]
worst_w = max(ref.rel_err(weights[1][k], weights[0][k]) for k in weights[0])
print(f'{name}: losses within {worst:.1e}, weights within {worst_w:.1e}')
sys.exit(0 if len(losses[0]) == 10 and worst <= 1e-4 and worst_w <= 1e-3 else 1)
PY"
  done
done
finish
