#!/usr/bin/env bash
# The token embedding on the host (mt-host-embedding): the host looks the tokens up in the
# table and scatter-adds their rows' gradient into the table's gradient, so the device never
# holds the table for the lookup and the link carries tokens x C, not vocab x C.
# - Untied, it trains bit for bit like the device lookup (the same CPU code in the same order),
#   resident and streamed-recompute on arrival.
# - Tied (the table is the LM head's weight), the head's gradient lands first and the rows are
#   added onto it: the device's sum in another order, within fp32 rounding of the device plan
#   after 10 steps; resident and streamed agree bit for bit.
# - A tied head split by vocabulary chunks — refused before, a budget the whole head misses now
#   picks the split with the embedding on the host — trains like the whole tied model; resident
#   vs streamed-recompute, deferred vs on-arrival, bit for bit.
# - The summary says where the lookup runs and what crosses the link; the plan holds the host
#   tasks; the split of a tied head with the lookup kept on the device is refused naming the fix.
# usage: host_embedding.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus
parity() { /usr/bin/python3 "$here/backend_parity.py" "$@"; }
grads() {  # grads PLAN NAME WEIGHTS: the first step's gradients, for backend_parity.py
  "$bin/mtrun" "$1" --data corpus.tok --weights "$3" --steps 1 --dump-grads "$2.grads.safetensors" \
    --print-every 100 >/dev/null
}

# Untied: the table is as large as the rest of the model (vocab 4096 x width 64).
untied=(llama-tiny --layers 4 --width 64 --ffn 256 --vocab 4096 --batch 4 --seq 32 --untied)
"$bin/mtc" "${untied[@]}" --schedule resident -o u.dev.plan --weights u0.safetensors > u.dev.txt
"$bin/mtc" "${untied[@]}" --schedule resident --embedding host -o u.host.plan --no-weights > u.host.txt
"$bin/mtc" "${untied[@]}" --schedule streamed-recompute --update on-arrival -o u.dev-arrival.plan --no-weights >/dev/null
"$bin/mtc" "${untied[@]}" --schedule streamed-recompute --update on-arrival --embedding host -o u.host-arrival.plan \
  --no-weights > u.host-arrival.txt
check "the summary says the lookup runs on the host and what crosses the link" \
  "grep -q 'embedding *the tokens looked up in embed.weight on the host.*(--embedding host): the tokens. rows cross the link, 32.0 KiB per step each way' u.host.txt"
check "the device lookup says nothing of it" "! grep -q '^  embedding' u.dev.txt"
# The table no longer crosses the link: 1/3 of the parameters (embed 4096x64 of 0.77 M).
check "the table stays on the host: weights cross the link 0.66x, not 1.00x" \
  "grep -q 'weights cross the link 0.66x' u.host.txt && grep -q 'weights cross the link 1.00x' u.dev.txt"
"$bin/mtdump" u.host-arrival.plan > u.host-arrival.dump
check "the plan has the lookup and the scatter on the host stream" \
  "grep -q 'host EMBEDDING_LOOKUP' u.host-arrival.dump && grep -q 'host EMBEDDING_GRAD' u.host-arrival.dump"
train u.dev.plan r.u-dev u0.safetensors && train u.host.plan r.u-host u0.safetensors
check "untied, resident: bit-identical losses to the device lookup" "cmp -s r.u-dev.loss r.u-host.loss"
check "untied, resident: bit-identical weights" "same_tensors r.u-dev.safetensors r.u-host.safetensors"
train u.dev-arrival.plan n.u-dev u0.safetensors --grad-clip 0 && train u.host-arrival.plan n.u-host u0.safetensors --grad-clip 0
check "untied, on arrival: bit-identical losses" "cmp -s n.u-dev.loss n.u-host.loss"
check "untied, on arrival: bit-identical weights" "same_tensors n.u-dev.safetensors n.u-host.safetensors"

# Tied, whole: the head's gradient lands, then the rows are added onto it.
tied=(llama-tiny --layers 4 --width 64 --ffn 256 --vocab 4096 --batch 4 --seq 32 --tied)
"$bin/mtc" "${tied[@]}" --schedule resident -o t.dev.plan --weights t0.safetensors >/dev/null
"$bin/mtc" "${tied[@]}" --schedule resident --embedding host -o t.host.plan --no-weights >/dev/null
"$bin/mtc" "${tied[@]}" --schedule streamed --embedding host -o t.host-streamed.plan --no-weights >/dev/null
train t.dev.plan r.t-dev t0.safetensors && train t.host.plan r.t-host t0.safetensors
train t.host-streamed.plan r.t-streamed t0.safetensors
grads t.dev.plan r.t-dev t0.safetensors
check "tied, whole: host vs device $(parity r 10 t-dev t-host)" "parity r 10 t-dev t-host >/dev/null"
check "tied, whole: resident vs streamed bit-identical weights" "same_tensors r.t-host.safetensors r.t-streamed.safetensors"

# Tied, split: 2 MiB is too small for the whole head (its logits alone are 2 MiB).
"$bin/mtc" "${tied[@]}" --device-mem 2MiB -o t.tight.plan --no-weights > t.tight.txt
"$bin/mtc" "${tied[@]}" --device-mem 2MiB --update on-arrival -o t.arrival.plan --no-weights >/dev/null
"$bin/mtc" "${tied[@]}" --schedule resident --vocab-chunks 8 -o t.split.plan --no-weights > t.split.txt
check "2 MiB splits the tied head into the fewest chunks that fit (8)" \
  "grep -q 'vocab split *embed.weight in 8 chunks.*the fewest that fit' t.tight.txt"
check "... with the lookup on the host, saying why" \
  "grep -q 'embedding *the tokens looked up in embed.weight on the host.*the vocabulary split needs the tied' t.tight.txt"
check "--vocab-chunks on a tied head takes the host lookup too" "grep -q '^  embedding .*on the host' t.split.txt"
train t.split.plan r.t-split t0.safetensors && train t.tight.plan r.t-tight t0.safetensors
check "tied split vs whole device: $(parity r 10 t-dev t-split)" "parity r 10 t-dev t-split >/dev/null"
check "tied split, resident vs streamed-recompute: bit-identical losses" "cmp -s r.t-split.loss r.t-tight.loss"
check "tied split, resident vs streamed-recompute: bit-identical weights" \
  "same_tensors r.t-split.safetensors r.t-tight.safetensors"
train t.split.plan n.t-split t0.safetensors --grad-clip 0 && train t.arrival.plan n.t-arrival t0.safetensors --grad-clip 0
check "tied split, on arrival: bit-identical weights" "same_tensors n.t-split.safetensors n.t-arrival.safetensors"

# Refusal: the split of a tied head whose lookup must stay on the device.
"$bin/mtc" "${tied[@]}" --vocab-chunks 2 --embedding device -o refused.plan --no-weights > refused.txt 2>&1
check "a tied split with --embedding device is refused, naming --embedding host" \
  "[ $? -eq 1 ] && grep -q 'needs an untied head (mtc --untied) or the token embedding on the host (mtc --embedding host)' refused.txt"
check "nothing half-written" "[ ! -e refused.plan ]"
finish
