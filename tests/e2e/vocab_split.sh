#!/usr/bin/env bash
# The LM head and the token embedding over vocabulary chunks (mt-split-vocab): a budget the
# whole head does not fit splits them into the fewest chunks that fit, and training gives the losses and weights of the
# unsplit model (fp32 rounding: within 1e-4 / 1e-3 relative after 10 steps); the same split
# resident and streamed-recompute, with the deferred or the on-arrival update, agree bit for
# bit. A tied head with its lookup on the device (host_embedding.sh splits one with the lookup
# on the host), a chunk count past the vocabulary and a budget even the split cannot meet are
# refused with a message saying what to do.
# usage: vocab_split.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

# A head as large as the rest of the model (vocab 4096 x width 64), its logits 4x larger.
shape=(llama-tiny --layers 4 --width 64 --ffn 256 --vocab 4096 --batch 4 --seq 32)
"$bin/mtc" "${shape[@]}" --schedule resident -o whole.plan --weights w0.safetensors > whole.txt
"$bin/mtc" "${shape[@]}" --schedule resident --vocab-chunks 8 -o split.plan --no-weights > split.txt
"$bin/mtc" "${shape[@]}" --device-mem 2MiB -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" --device-mem 2MiB --update on-arrival -o arrival.plan --no-weights > arrival.txt
whole_arena=$(sed -n 's/.*streamed-recompute \([0-9.]*\) MiB).*/\1/p' tight.txt)
check "unsplit, streamed-recompute needs more than 2 MiB (${whole_arena:-?} MiB)" \
  "awk -v a='${whole_arena:-0}' 'BEGIN { exit !(a > 2) }'"
check "2 MiB splits the head and the embedding into the fewest chunks that fit (8)" \
  "grep -q 'vocab split *lm_head.weight, embed.weight in 8 chunks.*the fewest that fit' tight.txt"
check "the on-arrival plan splits them the same way" "grep -q 'vocab split .* in 8 chunks' arrival.txt"
check "without a budget nothing is split" "! grep -q 'vocab split' whole.txt"

train whole.plan r.whole w0.safetensors && train split.plan r.split w0.safetensors && train tight.plan r.tight w0.safetensors
"$bin/mtrun" whole.plan --data corpus.tok --weights w0.safetensors --steps 1 --dump-grads r.whole.grads.safetensors \
  --print-every 100 >/dev/null
check "split resident vs streamed-recompute: bit-identical losses" "cmp -s r.split.loss r.tight.loss"
check "split resident vs streamed-recompute: bit-identical weights" "same_tensors r.split.safetensors r.tight.safetensors"
check "split vs whole: $(/usr/bin/python3 "$here/backend_parity.py" r 10 whole split)" \
  "/usr/bin/python3 '$here/backend_parity.py' r 10 whole split >/dev/null"
train split.plan n.split w0.safetensors --grad-clip 0 && train arrival.plan n.arrival w0.safetensors --grad-clip 0
check "split on-arrival: bit-identical losses" "cmp -s n.split.loss n.arrival.loss"
check "split on-arrival: bit-identical weights" "same_tensors n.split.safetensors n.arrival.safetensors"

# Refusals: exit 1, one message that names the fix.
"$bin/mtc" gpt2-tiny --vocab-chunks 2 --embedding device -o tied.plan --no-weights > tied.txt 2>&1
check "a tied head with its lookup on the device is refused, naming --untied" "[ $? -eq 1 ] && grep -q 'untied' tied.txt"
"$bin/mtc" "${shape[@]}" --vocab-chunks 5000 -o many.plan --no-weights > many.txt 2>&1
check "more chunks than the vocabulary is refused" "[ $? -eq 1 ] && grep -q 'vocab-chunks must be between' many.txt"
"$bin/mtc" "${shape[@]}" --device-mem 512KiB -o small.plan --no-weights > small.txt 2>&1
check "a budget even the split misses names the split and the smallest budget" \
  "[ $? -eq 1 ] && grep -q 'the vocabulary in 8 chunks.*); the budget is .*raise --device-mem to at least' small.txt"
check "nothing half-written" "[ ! -e tied.plan ] && [ ! -e many.plan ] && [ ! -e small.plan ]"
finish
