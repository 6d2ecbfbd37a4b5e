#!/usr/bin/env bash
# Token-tiled layer blocks (mt-tile-tokens): a budget no untiled plan fits (the MLP's
# activations of one block fill it) compiles into the fewest token tiles that fit, and training
# in tiles follows the untiled plan within fp32 rounding (each weight's gradient is the sum of its
# tiles' products: 1e-6 relative on the losses over 10 steps); tiles resident, streamed-recompute
# (each tile recomputed just before its backward), chosen by the budget and updated on arrival
# agree bit for bit, as do tiles inside a sequence (rope at an offset) against a resumed run; the
# head and its loss in tiles divide by the whole batch's counted targets (a loss mask: within
# 1e-6); --emit under the budget shows the tiled plan. A tile count that does not cut the tokens
# is refused naming the counts that work.
# usage: token_tiles.sh BIN_DIR WORK_DIR
set -uo pipefail
here="$(dirname "$(readlink -f "$0")")"
source "$here/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

# A wide MLP (ffn 1024) over 2 x 128 tokens: its activations are what fills a block's backward.
shape=(llama-tiny --layers 3 --width 64 --ffn 1024 --batch 2 --seq 128 --context 128)
"$bin/mtc" "${shape[@]}" --schedule resident -o whole.plan --weights w0.safetensors > whole.txt
"$bin/mtc" "${shape[@]}" --schedule resident --token-tiles 4 -o tiled.plan --no-weights > tiled.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --token-tiles 4 -o tiled-sr.plan --no-weights > tiled-sr.txt
"$bin/mtc" "${shape[@]}" --schedule streamed-recompute --token-tiles 4 --update on-arrival -o arrival.plan \
  --no-weights > arrival.txt
"$bin/mtc" "${shape[@]}" --device-mem 5MiB -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" --device-mem 5MiB --token-tiles 1 -o untiled.plan --no-weights > untiled.txt 2>&1
check "a budget no untiled plan fits tiles the blocks: $(grep -o 'token tiles *each layer block.* in [0-9]* tiles of [0-9]* tokens ([^)]*)' tight.txt)" \
  "grep -q 'token tiles .* in [0-9]* tiles of [0-9]* tokens (the fewest that fit --device-mem)' tight.txt"
check "without a budget nothing is tiled" "! grep -q 'token tiles' whole.txt"
# --emit of a later stage under the same budget shows the plan mtc compiles: its tiles, its arena.
"$bin/mtc" "${shape[@]}" --device-mem 5MiB --emit=memory > tight.mlir 2>&1
tight_tiles=$(sed -n 's/.* in \([0-9]*\) tiles of .*/\1/p' tight.txt)
check "--emit=memory under the budget: the plan's ${tight_tiles} tiles" \
  "[ -n '$tight_tiles' ] && grep -q 'mt.token_tiles = $tight_tiles :' tight.mlir && ! grep -q 'error' tight.mlir"
"$bin/mtc" "${shape[@]}" --token-tiles 4 --emit=tile-tokens > tiles.mlir
check "--emit=tile-tokens shows the tiles: 3 blocks x 2 runs, and the head's input and targets, split into 4" \
  "[ \$(grep -c 'mt.token_split' tiles.mlir) -eq 8 ] && grep -q 'position_offset = 64' tiles.mlir &&
   [ \$(grep -c 'mt.xent_tile' tiles.mlir) -eq 4 ] && grep -q 'mt.count_targets' tiles.mlir"
check "the summary names --token-tiles and the tiles' cost" \
  "grep -q 'in 4 tiles of 64 tokens (--token-tiles), each tile.s activations recomputed just before its backward.*gradients summed over the tiles' tiled-sr.txt"

train whole.plan r.whole w0.safetensors
"$bin/mtrun" whole.plan --data corpus.tok --weights w0.safetensors --steps 1 --dump-grads r.whole.grads.safetensors \
  --print-every 100 >/dev/null
for plan in tiled tiled-sr tight; do train $plan.plan r.$plan w0.safetensors; done
check "tiled vs untiled: $(/usr/bin/python3 "$here/backend_parity.py" r 10 whole tiled --tol 1e-6,1e-4)" \
  "/usr/bin/python3 '$here/backend_parity.py' r 10 whole tiled --tol 1e-6,1e-4 >/dev/null"
check "tiled resident vs streamed-recompute: bit-identical losses" "cmp -s r.tiled.loss r.tiled-sr.loss"
check "tiled resident vs streamed-recompute: bit-identical weights" "same_tensors r.tiled.safetensors r.tiled-sr.safetensors"
untiled=$(sed -n 's/.*needs at least [0-9]* bytes (\([0-9.]*\) MiB) of device memory.*/\1/p' untiled.txt)
check "untiled, the most frugal plan needs more than 5 MiB (${untiled:-?} MiB)" \
  "awk -v a='${untiled:-0}' 'BEGIN { exit !(a > 5) }'"
check "the budget's tiles (4) vs the same tiles resident: bit-identical weights" \
  "grep -q ' in 4 tiles of 64 tokens' tight.txt && same_tensors r.tiled.safetensors r.tight.safetensors"
train tiled.plan n.tiled w0.safetensors --grad-clip 0 && train arrival.plan n.arrival w0.safetensors --grad-clip 0
check "tiled on-arrival: bit-identical losses" "cmp -s n.tiled.loss n.arrival.loss"
check "tiled on-arrival: bit-identical weights" "same_tensors n.tiled.safetensors n.arrival.safetensors"
check_resume tiled-sr.plan w0.safetensors

# A loss mask (a third of the targets counted, in runs): the head's tiles divide by the whole
# batch's count, as the untiled loss's mean over the counted targets.
/usr/bin/python3 -c "import sys; sys.path.insert(0, '$here'); import mt_reference as r; \
ids = [(7 * i) % 251 for i in range(20000)]; \
r.write_tokens('masked.tok', ids, 256, [(i // 5) % 3 == 0 for i in range(20000)])"
for plan in whole tiled-sr; do
  "$bin/mtrun" $plan.plan --data masked.tok --weights w0.safetensors --steps 10 --log m.$plan.jsonl \
    --export m.$plan.safetensors --print-every 100 >/dev/null
done
cp r.whole.grads.safetensors m.whole.grads.safetensors
check "masked, tiled vs untiled: $(/usr/bin/python3 "$here/backend_parity.py" m 10 whole tiled-sr --tol 1e-6,1e-4)" \
  "/usr/bin/python3 '$here/backend_parity.py' m 10 whole tiled-sr --tol 1e-6,1e-4 >/dev/null"

# Refusals: exit 1, one message naming the counts that work; nothing written.
"$bin/mtc" "${shape[@]}" --token-tiles 3 -o three.plan --no-weights > three.txt 2>&1
check "3 tiles of 256 tokens are refused, naming the counts that work" \
  "[ $? -eq 1 ] && grep -q 'cannot cut 2 x 128 tokens into 3 token tiles.*counts that work: 2, 4, 8' three.txt"
"$bin/mtc" "${shape[@]}" --forward-only --token-tiles 4 -o eval.plan --no-weights > eval.txt 2>&1
check "a forward-only plan with token tiles is refused" "[ $? -eq 1 ] && grep -q 'token-tiles is for training plans' eval.txt"
check "nothing half-written" "[ ! -e three.plan ] && [ ! -e eval.plan ]"
finish
