#!/usr/bin/env bash
# Validation is one pass over the held-out tokens: consecutive windows, each token a target once,
# the last batch's spare rows padding the loss ignores. So the held-out loss is the same whatever
# the plan's batch (4 rows, 3 of 16 batches' rows padding at the end, or 1 row), over the same
# count of targets; the log carries its perplexity; --val-batches takes the first batches only.
# --keep-best keeps the weights of the lowest validation loss (best.ckpt.safetensors) and exports
# those: a run trained to overfit (on one repeated phrase, validated on other text) warns after
# three validations above its best, and exports the weights a run stopped at the best step ends
# with, bit for bit; resumed halfway, it keeps the same best.
# --epochs E trains the steps that draw E times the training tokens; --export-only exports a
# checkpoint's weights without data or training.
# usage: validation.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
for i in $(seq 1 300); do echo "$i: how vexingly quick daft zebras jump $((i % 17))"; done | head -c 6000 > train.txt
for i in $(seq 1 100); do echo "sphinx of black quartz, judge my vow number $i"; done | head -c 2000 > held.txt
for part in train held; do "$bin/mttok" --bytes $part.txt -o $part.tok >/dev/null; done
"$bin/mtc" gpt2-tiny --batch 4 --seq 32 -o b4.plan >/dev/null
"$bin/mtc" gpt2-tiny --batch 1 --seq 32 -o b1.plan >/dev/null
for b in b4 b1; do
  "$bin/mtrun" $b.plan --data train.tok --val-data held.tok --weights b4.safetensors --steps 1 --lr 0 \
    --log $b.jsonl --print-every 100 > $b.txt || echo "FAIL: mtrun $b.plan"
done
# 2000 held-out tokens: (2000 - 1) / 32 = 62 windows of 32 targets.
field() { /usr/bin/python3 -c "import json,sys; print(next(json.loads(l)['$2'] for l in open('$1') if '$2' in l))"; }
check "every held-out token a target once, whatever the batch" \
  "[ $(field b4.jsonl val_targets) = 1984 ] && [ $(field b1.jsonl val_targets) = 1984 ]"
check "the same held-out loss at batch 4 (padded) and batch 1" \
  "/usr/bin/python3 -c 'import sys; a, b = $(field b4.jsonl val_loss), $(field b1.jsonl val_loss); sys.exit(abs(a - b) > 1e-6 * abs(b))'"
check "perplexity is exp(loss)" \
  "/usr/bin/python3 -c 'import math, sys; sys.exit(abs(math.exp($(field b4.jsonl val_loss)) - $(field b4.jsonl val_ppl)) > 1e-9 * $(field b4.jsonl val_ppl))'"
check "the header says how many sequences and batches" "grep -q 'validation: 62 held-out sequences in 16 batches, all of them each time' b4.txt"
"$bin/mtrun" b4.plan --data train.tok --val-data held.tok --weights b4.safetensors --steps 1 --lr 0 --val-batches 3 \
  --log cut.jsonl --print-every 100 > cut.txt
check "--val-batches 3: the first 3 batches' 384 targets" \
  "[ $(field cut.jsonl val_targets) = 384 ] && grep -q 'first 3 of 16 held-out batches' cut.txt"

# --epochs: the steps that draw that many times the training tokens (6000 / 128 per step), said.
"$bin/mtrun" b4.plan --data train.tok --epochs 0.5 --log epochs.jsonl --print-every 100 > epochs.txt
check "--epochs 0.5: 24 steps of 128 tokens" \
  "grep -q -- '--epochs 0.5: 24 steps of 128 tokens over the 6000 training tokens' epochs.txt && [ \$(grep -c '\"loss\"' epochs.jsonl) = 24 ]"
check "--epochs with --steps is refused (exit 2)" \
  "$bin/mtrun b4.plan --data train.tok --epochs 1 --steps 3 > /dev/null 2>&1; [ \$? = 2 ]"

# Overfitting: the same phrase over and over, validated on other text.
for i in $(seq 1 400); do echo "aaaa bbbb aaaa bbbb"; done > same.txt
"$bin/mttok" --bytes same.txt -o same.tok >/dev/null
common=(b4.plan --data same.tok --val-data held.tok --weights b4.safetensors --lr 1e-2 --min-lr-ratio 1 --val-every 2
        --print-every 100)
"$bin/mtrun" "${common[@]}" --steps 12 --checkpoint-dir ck --keep-best --export best.safetensors --log fit.jsonl > fit.txt
best=$(sed -n 's/^--keep-best: the exports hold the weights after step \([0-9]*\) .*/\1/p' fit.txt)
check "the overfitting run is warned" "grep -q 'warning: the validation loss has stayed above its best' fit.txt"
check "--keep-best names the step it exports (a step before the last)" "[ -n '$best' ] && [ '$best' -lt 12 ]"
check "best.ckpt.safetensors kept beside the step checkpoints" "[ -f ck/best.ckpt.safetensors ] && [ -f ck/step-000000012.ckpt.safetensors ]"
"$bin/mtrun" "${common[@]}" --steps "${best:-1}" --export stopped.safetensors > /dev/null
check "the export is the best step's weights, bit for bit" "same_tensors best.safetensors stopped.safetensors"
# Stopped after 6 steps (a constant learning rate: the 6-step run's schedule is the 12-step one's),
# then resumed to 12.
"$bin/mtrun" "${common[@]}" --steps 6 --checkpoint-dir ck2 --keep-best > /dev/null
"$bin/mtrun" "${common[@]}" --steps 12 --checkpoint-dir ck2 --keep-best --resume ck2 --export resumed.safetensors \
  > resumed.txt
check "resumed halfway, the same best exported" "same_tensors best.safetensors resumed.safetensors"
# --export-only: a checkpoint's weights exported without data or training.
"$bin/mtrun" b4.plan --data train.tok --steps 2 --checkpoint-dir eo --export trained.safetensors --print-every 100 > /dev/null
"$bin/mtrun" b4.plan --resume eo --export-only --export only.safetensors > only.txt
check "--export-only writes the checkpoint's weights bit for bit, with no --data" \
  "same_tensors trained.safetensors only.safetensors && grep -q -- '--export-only: the weights after step 2' only.txt"
check "--export-only without --resume is refused (exit 2)" \
  "$bin/mtrun b4.plan --export-only --export x.safetensors > /dev/null 2>&1; [ \$? = 2 ]"
refused=$("$bin/mtrun" b4.plan --data train.tok --val-data held.tok --steps 1 --keep-best 2>&1)
code=$?
check "--keep-best without --checkpoint-dir is refused (exit 2), naming the fix" \
  "[ $code = 2 ] && grep -q 'give --checkpoint-dir' <<< \"\$refused\""
finish
