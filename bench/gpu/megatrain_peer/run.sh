#!/usr/bin/env bash
# The published MegaTrain (DLYuanGod/MegaTrain, arXiv 2604.05091; 272 model TFLOP/s for Qwen2.5-7B
# on one H100) as a peer on the lent GPU machine (issue 28, item 7): its own examples/sft/train.py,
# unmodified, on a Qwen2.5-7B-shaped model with random weights, with the settings of its
# single-GPU benchmark config (examples/sft/configs/qwen_7b_1gpu.yaml: bf16, batch 158 x 1024,
# 12 gradient slabs, a checkpoint every 4 layers), so its step time stands beside ours on one GPU.
# None of its code is in this repository: bench/gpu/megatrain_peer/fetch.sh copies a snapshot into
# .peer/megatrain (git-ignored), which the device tool carries:
#   here:   fetch github:DLYuanGod/MegaTrain (the search tool), then
#           bash bench/gpu/megatrain_peer/fetch.sh /work/.mirror/DLYuanGod+MegaTrain/repo
#   there:  run(command="bash bench/gpu/megatrain_peer/run.sh", carry=[".peer/megatrain"], timeout_s=360)
# What differs from its paper's run, and why (mt_patches.py does each, MegaTrain's files untouched):
#   - attention through transformers' "sdpa" (flash-attn is not installed there): its single-GPU
#     path hands each layer the raw [B, T] mask, which only flash_attention_2 takes, so the sdpa
#     function is wrapped (an all-ones mask becomes None: the causal flash kernel);
#   - PyTorch's AdamW on the host (DeepSpeed is not installed there; its paper used DeepSpeed's CPU
#     Adam): the step time includes it, and parse_log.py also gives the forward + backward alone;
#   - the model built from config.json (random weights from a fixed pool: their values do not
#     change the work) instead of a 15 GB checkpoint written and read back (SAVE_WEIGHTS=1 does that);
#   - synthetic rows of 1,024 real tokens (its run padded GSM8K rows to 1,024: at least as much
#     attention work here).
# Its parameters are bf16 on the host as its yaml's dtype says (not fp32 masters): note that
# beside our fp32 masters when comparing. Env: BS (158), SEQ (1024), STEPS (4), TLIM (230 s for
# the training process), SMOKE=0 skips the 4-layer check first (~40 s), MT_FUSED_ADAMW=1.
# Prints a MEGATRAIN_SUMMARY JSON line (parse_log.py: 6 P T over each step from the second on).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export MT_SRC="${MT_SRC:-$(cd "$here/../../.." && pwd)/.peer/megatrain}"
[ -f "$MT_SRC/examples/sft/train.py" ] || { echo "no MegaTrain snapshot in $MT_SRC: run fetch.sh here first"; exit 2; }
work="${WORK:-/tmp/mt_peer}" bs="${BS:-158}" seq="${SEQ:-1024}" steps="${STEPS:-4}" tlim="${TLIM:-230}"
mkdir -p "$work"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
start=$(date +%s); say() { echo "[t+$(( $(date +%s) - start ))s] $*"; }

say "host: $(nproc) cpus; $(free -g | awk '/Mem:/{print $2" GiB RAM, "$7" GiB available"}')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch, transformers; print('torch', torch.__version__, '| transformers', transformers.__version__)"
python3 -c "import datasets" 2>/dev/null || { export PYTHONPATH="$here/shim${PYTHONPATH:+:$PYTHONPATH}"; say "using the datasets shim"; }

if [ "${SMOKE:-1}" = 1 ]; then  # the whole path on a 4-layer model, 2 steps
  say "smoke test (a 4-layer Qwen2, batch 4 x 256, 2 steps)"
  python3 "$here/prep.py" --out "$work/smoke" --batch-size 4 --seq-len 256 --num-steps 2 --tiny || exit 3
  timeout -k 10 120 python3 "$here/mt_run.py" --config "$work/smoke/megatrain_qwen7b_h200.yaml" > "$work/smoke.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] || ! grep -q "TFLOPS" "$work/smoke.log"; then
    echo "smoke test failed (exit $rc):"; tail -n 40 "$work/smoke.log"
    [ -n "${OUT:-}" ] && cp "$work/smoke.log" "$OUT/"
    exit 4
  fi
  say "smoke test passed"
fi

prep=(--out "$work" --batch-size "$bs" --seq-len "$seq" --num-steps "$steps")
[ "${SAVE_WEIGHTS:-0}" = 1 ] && prep+=(--save-weights)
say "prep"; python3 "$here/prep.py" "${prep[@]}" || exit 2
log="$work/megatrain_train.log"
say "train (batch $bs x $seq, $steps steps, at most ${tlim} s)"
rm -f "$work/.stop"
# Host and GPU memory every 20 s while it trains (its host copy is the tight part: ~92 of 128 GiB).
( while [ ! -e "$work/.stop" ]; do sleep 20
    free -g | awk -v t=$(( $(date +%s) - start )) '/Mem:/{print "[mem t+"t"s] used "$3" GiB, available "$7" GiB"}'
    nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader | sed 's/^/[gpu] /'; done ) &
monitor=$!
# Its output to a file, not through a pipe a time limit would kill with it.
timeout -k 15 "$tlim" python3 "$here/mt_run.py" --config "$work/megatrain_qwen7b_h200.yaml" > "$log" 2>&1
rc=$?
touch "$work/.stop"; wait "$monitor" 2>/dev/null
tail -n 30 "$log"
say "train exit code $rc (124: the ${tlim} s limit; the steps done are still read)"
python3 "$here/parse_log.py" "$log" --batch-size "$bs" --seq-len "$seq" --json "$work/megatrain_summary.json"
[ -n "${OUT:-}" ] && cp "$log" "$work/megatrain_summary.json" "$work/megatrain_qwen7b_h200.yaml" "$OUT/" 2>/dev/null
say "done"
