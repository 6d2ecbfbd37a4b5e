#!/usr/bin/env bash
# The key/value cache (mtc --kv-cache) gives the logits of recomputing the whole prefix: for
# GPT-2 (learned positions), Llama (rotary, grouped heads), Qwen2 (q/k/v biases) and Qwen3 (heads
# of their own width, q/k norms), fp32 and a
# batch of rows with different texts, every position's logits of the decode plan against the
# window plan's (kv_cache_check); streamed and bf16 decode plans too. Flags that cannot make a decode step are
# refused.
# usage: kv_cache.sh BIN_DIR CHECK WORK_DIR
set -euo pipefail
bin=$1 check=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
failed=0
for model in gpt2-tiny llama-tiny qwen-tiny qwen3-tiny; do
  echo "== $model"
  "$bin/mtc" "$model" --forward-only --batch 3 --seq 40 -o "$model.window.plan" > /dev/null
  "$bin/mtc" "$model" --forward-only --kv-cache --batch 3 --seq 40 --no-weights -o "$model.decode.plan" \
    | grep "decode step"
  "$check" "$model.window.plan" "$model.decode.plan" "$model.window.safetensors" || failed=$((failed + 1))
done
# Streamed (a budget below the resident plan's: the weights copied in per block): the same logits;
# the weights whose bytes nothing else takes are still kept.
"$bin/mtc" llama-tiny --forward-only --kv-cache --batch 3 --seq 40 --device-mem 500KiB --no-weights \
  -o streamed.decode.plan | grep "schedule streamed"
"$bin/mtc" llama-tiny --forward-only --batch 3 --seq 40 --device-mem 600KiB --schedule streamed --no-weights \
  -o streamed.window.plan >/dev/null
"$check" streamed.window.plan streamed.decode.plan llama-tiny.window.safetensors || failed=$((failed + 1))
# A bf16 decode plan (its activations rounded where the window plan's are): it computes in bf16
# (forward-only plans ignored --precision until plan 1.11's change) and agrees with the bf16
# window plan within bf16's rounding.
"$bin/mtc" llama-tiny --forward-only --kv-cache --batch 3 --seq 40 --precision bf16 --no-weights -o bf16.decode.plan >/dev/null
"$bin/mtc" llama-tiny --forward-only --batch 3 --seq 40 --precision bf16 --no-weights -o bf16.window.plan >/dev/null
for plan in bf16.decode.plan bf16.window.plan; do
  header=$("$bin/mtdump" $plan)
  grep -q "precision bf16" <<< "$header" || { echo "FAIL: $plan is not a bf16 plan"; failed=$((failed + 1)); }
done
"$check" bf16.window.plan bf16.decode.plan llama-tiny.window.safetensors 1e-2 || failed=$((failed + 1))
# Refusals: without --forward-only, and for a model whose attention the compiler does not build.
expect_refusal() {  # WHAT PATTERN COMMAND...
  local what=$1 pattern=$2
  shift 2
  if out=$("$@" 2>&1); then echo "FAIL: $what was accepted"; failed=$((failed + 1)); return; fi
  grep -q -- "$pattern" <<< "$out" || { echo "FAIL: $what: unexpected message: $out"; failed=$((failed + 1)); }
}
expect_refusal "--kv-cache without --forward-only" "requires --forward-only" \
  "$bin/mtc" gpt2-tiny --kv-cache --batch 1 --seq 8 -o refused.plan
printf 'module {}\n' > empty.mlir
expect_refusal "--kv-cache on a .mlir model" "builds the decode step of a built-in model" \
  "$bin/mtc" empty.mlir --forward-only --kv-cache -o refused.plan
[ ! -e refused.plan ] || { echo "FAIL: a refused compile left refused.plan"; failed=$((failed + 1)); }
[ "$failed" -eq 0 ] && echo "kv_cache: passed" || { echo "kv_cache: $failed failed"; exit 1; }
