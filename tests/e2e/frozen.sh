#!/usr/bin/env bash
# Frozen parameters (mtc --frozen / --trainable; torch_parity's *-top, *-frozen-* presets check
# the numbers against PyTorch). Here: the layout changes nothing. With the embedding, layers 0-1
# and the LM head of a 4-layer Llama frozen, plans compiled resident, streamed, streamed with
# every block recomputed, under a tiny device budget, with the embedding on the host and with
# the vocabulary in 3 chunks (against the same split) give bit-identical losses and weights after
# 10 steps, and so does
# the on-arrival update against the resident plan (both without clipping); the frozen tensors
# leave every run as they came in. The plan holds no gradient or moment of a frozen tensor and
# costs fewer host bytes; a checkpoint resumes bit for bit; 2 MPI ranks train as one process
# with --accumulate 2; a bf16 plan leaves the frozen weights as they were. A pattern that
# matches nothing, one that leaves nothing to train, and --frozen with --forward-only are refused.
# LoRA (mtc --lora; torch_parity's llama-tiny-lora checks the numbers, hf_peft the merged
# export): resident and streamed-recompute under a budget agree bit for bit, and so does the
# vocabulary split resident and streamed; only the adapters move; a checkpoint resumes bit for
# bit; the frozen base kept on the device between steps (--keep-frozen auto) trains bit for bit
# as copied in every step (resident, streamed-recompute, bf16), a later step copying in a
# tenth of the bytes or less, and so does a budget with room for only some of it (fp32, bf16),
# a later step copying in fewer bytes; 2 ranks train as --accumulate 2; --export-peft writes --trainable's modules whole
# (modules_to_save) and refuses what PEFT cannot hold; a bf16 plan learns; LoRA's dropout with
# rsLoRA agrees across layouts and ranks and is off in validation; DoRA's magnitudes start at the
# row norms however they are made, and DoRA agrees across layouts and ranks; targets
# that match nothing, that are not weights or that are read as a table, an ONNX model, --lora
# with --forward-only and --lora-alpha without --lora are refused.
# usage: frozen.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
make_corpus

shape=(llama-tiny --layers 4 --width 128 --ffn 512 --batch 4 --seq 32)
trainable=(--trainable 'layers\.[23]\.|^norm\.')
"$bin/mtc" "${shape[@]}" --schedule resident -o all.plan --weights w0.safetensors > all.txt
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --schedule resident -o resident.plan --no-weights > resident.txt
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --schedule streamed -o streamed.plan --no-weights > streamed.txt
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --schedule streamed-recompute -o recompute.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --device-mem 4MiB -o tight.plan --no-weights > tight.txt
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --embedding host -o host.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --vocab-chunks 3 -o chunks.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --vocab-chunks 3 --schedule streamed-recompute -o chunks.streamed.plan \
  --no-weights >/dev/null
check "the summary counts the frozen parameters" "grep -q 'of which .* frozen' resident.txt"
check "a 4 MiB budget streams" "grep -q 'schedule streamed' tight.txt"
bytes_per_param() { sed -n 's/.*(\([0-9.]*\) bytes\/param.*/\1/p' "$1"; }
check "frozen parameters cost fewer host bytes ($(bytes_per_param resident.txt) against $(bytes_per_param all.txt))" \
  "awk 'BEGIN { exit !($(bytes_per_param resident.txt) < 0.65 * $(bytes_per_param all.txt)) }'"
"$bin/mtdump" resident.plan > resident.dump
check "mtdump marks the frozen tensors" "grep -q 'PARAM .*embed.weight (frozen)' resident.dump"
check "a frozen tensor has no gradient or moments" \
  "! grep -qE '(layers\.[01]\..*|embed.weight|lm_head.weight)\.(grad|exp_avg)' resident.dump"
check "a trained tensor has them" "grep -q 'layers.3.mlp.down.weight.exp_avg_sq' resident.dump"
flops() { sed -n 's/.*per step *\([0-9.e+]*\) FLOP.*/\1/p' "$1"; }
check "less compute: the backward stops at layer 2 ($(flops resident.txt) against $(flops all.txt) FLOP)" \
  "awk 'BEGIN { exit !($(flops resident.txt) < 0.7 * $(flops all.txt)) }'"

# moved A B: the tensors of B that differ from A's, byte for byte, one per line.
moved() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
            for k, e in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
print("\n".join(sorted(k for k in a if a[k] != b[k])))
EOF
}
# unchanged NAME: NAME.safetensors moved only what trains (layers 2-3 and the final norm).
unchanged() { ! moved w0.safetensors "$1.safetensors" | grep -vE 'layers\.[23]\.|^norm\.'; }
for plan in resident streamed recompute tight host chunks chunks.streamed; do
  train $plan.plan $plan w0.safetensors
  check "$plan: the frozen tensors are unchanged" "unchanged $plan"
done
for plan in streamed recompute tight host; do
  check "$plan: bit-identical losses" "cmp -s resident.loss $plan.loss"
  check "$plan: bit-identical weights" "same_tensors resident.safetensors $plan.safetensors"
done
# The vocabulary's chunks round the cross-entropy otherwise (vocab_split.sh: 1e-4 of the whole
# head's); the split resident and streamed agree bit for bit.
check "chunks streamed: bit-identical losses" "cmp -s chunks.loss chunks.streamed.loss"
check "chunks streamed: bit-identical weights" "same_tensors chunks.safetensors chunks.streamed.safetensors"
check "chunks: the whole head's losses within 1e-4" \
  "paste resident.loss chunks.loss | awk '{ d = \$1 - \$2; if (d < 0) d = -d; if (d > 1e-4 * \$1) bad = 1 } END { exit bad }'"
check "the trained tensors moved" "! same_tensors w0.safetensors resident.safetensors >/dev/null"

# The embedding alone trains, looked up on the host: its gradient is the tokens' rows alone.
"$bin/mtc" "${shape[@]}" --trainable '^embed' --embedding host -o embed.plan --no-weights > embed.txt 2>&1
check "the embedding alone, on the host: it compiles" "grep -q 'of which .* frozen' embed.txt"
train embed.plan embed w0.safetensors
check "the embedding alone: it learns" "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first) }' embed.loss"

# The on-arrival update against the resident plan, both without clipping.
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --device-mem 4MiB --update on-arrival -o arrival.plan --no-weights >/dev/null
train resident.plan resident.noclip w0.safetensors --grad-clip 0
train arrival.plan arrival.noclip w0.safetensors --grad-clip 0
check "on-arrival: bit-identical losses" "cmp -s resident.noclip.loss arrival.noclip.loss"
check "on-arrival: bit-identical weights" "same_tensors resident.noclip.safetensors arrival.noclip.safetensors"

check_resume resident.plan w0.safetensors

# bf16: the frozen weights' bf16 copies are made once, from the weights read.
"$bin/mtc" "${shape[@]}" "${trainable[@]}" --precision bf16 -o bf16.plan --no-weights >/dev/null
train bf16.plan bf16 w0.safetensors
check "bf16: the frozen tensors are unchanged" "unchanged bf16"
check "bf16: it learns" "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first) }' bf16.loss"

# ranks_match_accumulate PLAN NAME WEIGHTS: 2 MPI ranks train PLAN from WEIGHTS (10 steps) to the
# weights of one process with --accumulate 2.
ranks_match_accumulate() {
  train "$1" "$2.accumulate" "$3" --accumulate 2
  mpirun -np 2 --bind-to none "$bin/mtrun" "$1" --data corpus.tok --weights "$3" --steps 10 \
    --export "$2.ranks.safetensors" --print-every 100 >/dev/null &&
    same_tensors "$2.accumulate.safetensors" "$2.ranks.safetensors"
}

# 2 ranks as one process with --accumulate 2: the exchange carries the trained gradients only.
if command -v mpirun >/dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
    OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
  train resident.plan accumulate w0.safetensors --accumulate 2
  mpirun -np 2 --bind-to none "$bin/mtrun" resident.plan --data corpus.tok --weights w0.safetensors --steps 10 \
    --log ranks.jsonl --export ranks.safetensors --print-every 100 >/dev/null
  check "2 ranks: the weights of --accumulate 2" "same_tensors accumulate.safetensors ranks.safetensors"
else
  check "mpirun is installed (bash tools/setup.sh installs openmpi-bin)" false
fi

# LoRA on every projection of the layers.
lora=(--lora 8 --lora-alpha 16 --lora-targets 'attn\.|mlp\.')
"$bin/mtc" "${shape[@]}" "${lora[@]}" --schedule resident -o lora.plan --weights lw0.safetensors > lora.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" --device-mem 4MiB -o lora.tight.plan --no-weights > lora.tight.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" --vocab-chunks 2 --schedule streamed-recompute -o lora.chunks.plan \
  --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${lora[@]}" --vocab-chunks 2 -o lora.chunks.resident.plan --no-weights >/dev/null
check "lora: the summary names the adapters" "grep -q 'lora *rank 8, alpha 16 (the update x 2) on 28 weights' lora.txt"
check "lora: a 4 MiB budget streams" "grep -q 'schedule streamed' lora.tight.txt"
for plan in lora lora.tight lora.chunks lora.chunks.resident; do train $plan.plan $plan lw0.safetensors; done
check "lora streamed: bit-identical losses" "cmp -s lora.loss lora.tight.loss"
check "lora streamed: bit-identical weights" "same_tensors lora.safetensors lora.tight.safetensors"
check "lora split streamed: bit-identical weights" "same_tensors lora.chunks.resident.safetensors lora.chunks.safetensors"
moved lw0.safetensors lora.safetensors > lora.moved
check "lora: the 28 weights' adapters move ($(wc -l < lora.moved) tensors)" "[ \$(grep -c '\.lora_[AB]\.weight$' lora.moved) -eq 56 ]"
check "lora: nothing else moves" "! grep -v '\.lora_[AB]\.weight$' lora.moved"
"$bin/mtc" "${shape[@]}" "${lora[@]}" --precision bf16 -o lora.bf16.plan --no-weights >/dev/null
train lora.bf16.plan lora.bf16 lw0.safetensors --lr 1e-2
check "lora bf16: it learns" "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first) }' lora.bf16.loss"
# The frozen base kept on the device between steps (--keep-frozen auto, the default, where the
# budget has room: copied in the first step only), bit for bit as copied in every step
# (--keep-frozen off): resident, streamed-recompute (each frozen weight copied once a step, not per
# block region), bf16 (its staging copies); under 5 MiB (fp32) and 2 MiB (bf16) budgets with a
# slow link (0.5 GB/s: the copies bind the step), some of them (those read in the most block
# regions, as many as fit), the rest streamed; under 4 MiB on the cpu profile, none: room for
# only some, but the step is bound by compute.
"$bin/mtc" "${shape[@]}" "${lora[@]}" --schedule resident --keep-frozen off -o lora.off.plan --no-weights > lora.off.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" --schedule streamed-recompute -o lora.kept.plan --no-weights > lora.kept.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" --schedule streamed-recompute --keep-frozen off -o lora.kept.off.plan \
  --no-weights > lora.kept.off.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" --precision bf16 --keep-frozen off -o lora.bf16.off.plan --no-weights >/dev/null
slow_link=(--hw cpu,link-gbps=0.5)
"$bin/mtc" "${shape[@]}" "${lora[@]}" "${slow_link[@]}" --device-mem 5MiB -o lora.part.plan --no-weights > lora.part.txt
"$bin/mtc" "${shape[@]}" "${lora[@]}" "${slow_link[@]}" --device-mem 5MiB --keep-frozen off -o lora.part.off.plan \
  --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${lora[@]}" "${slow_link[@]}" --precision bf16 --device-mem 2MiB -o lora.bf16.part.plan \
  --no-weights > lora.bf16.part.txt
for txt in lora lora.kept; do
  check "$txt: the frozen weights kept on the device" "grep -q 'frozen weights .* kept on the device between steps' $txt.txt"
done
check "--keep-frozen off: copied every step" "grep -q 'frozen weights copied in every step.*--keep-frozen off' lora.kept.off.txt"
check "4 MiB, the cpu profile: none kept, compute binds" \
  "grep -q 'frozen weights copied in every step.*room for only some, and the step is bound by compute' lora.tight.txt"
for txt in lora.part lora.bf16.part; do
  check "$txt: some of the frozen weights kept" \
    "grep -q 'frozen weights .* kept on the device between steps, [0-9]* of the 39 .*; the rest copied in every step' $txt.txt"
done
check "5 MiB: as many as the budget has room for" "grep -q 'of the 39 (--keep-frozen auto: the budget has room for no more)' lora.part.txt"
for plan in lora.off lora.kept lora.kept.off lora.part; do train $plan.plan $plan lw0.safetensors; done
train lora.bf16.off.plan lora.bf16.off lw0.safetensors --lr 1e-2
train lora.bf16.part.plan lora.bf16.part lw0.safetensors --lr 1e-2
for plan in lora.off lora.kept lora.kept.off lora.part; do
  check "$plan: bit-identical losses" "cmp -s lora.loss $plan.loss"
  check "$plan: bit-identical weights" "same_tensors lora.safetensors $plan.safetensors"
done
check "lora bf16 kept: bit-identical losses" "cmp -s lora.bf16.loss lora.bf16.off.loss"
check "lora bf16 kept: bit-identical weights" "same_tensors lora.bf16.safetensors lora.bf16.off.safetensors"
check "lora bf16 partly kept: bit-identical losses" "cmp -s lora.bf16.loss lora.bf16.part.loss"
check "lora bf16 partly kept: bit-identical weights" "same_tensors lora.bf16.safetensors lora.bf16.part.safetensors"
# What a later step copies in, measured by mtrun: the adapters and the tokens, not the base.
h2d_mb() {
  "$bin/mtrun" "$1" --data corpus.tok --weights lw0.safetensors --steps 3 --print-every 100 |
    sed -n 's/.*; h2d \([0-9.e+-]*\) MB\/step.*/\1/p'
}
kept_mb=$(h2d_mb lora.kept.plan) off_mb=$(h2d_mb lora.kept.off.plan)
check "kept: a later step copies in ${kept_mb} MB, not ${off_mb}" \
  "awk 'BEGIN { exit !(\"$kept_mb\" != \"\" && \"$off_mb\" != \"\" && $kept_mb * 10 < $off_mb) }'"
part_mb=$(h2d_mb lora.part.plan) part_off_mb=$(h2d_mb lora.part.off.plan)
check "partly kept: a later step copies in ${part_mb} MB, not ${part_off_mb}" \
  "awk 'BEGIN { exit !(\"$part_mb\" != \"\" && \"$part_off_mb\" != \"\" && $part_mb + 1 < $part_off_mb) }'"
check_resume lora.plan lw0.safetensors
if command -v mpirun >/dev/null; then
  rm -rf peft.accumulate peft.ranks
  train lora.plan lora.accumulate lw0.safetensors --accumulate 2 --export-peft peft.accumulate
  mpirun -np 2 --bind-to none "$bin/mtrun" lora.plan --data corpus.tok --weights lw0.safetensors --steps 10 \
    --export lora.ranks.safetensors --export-peft peft.ranks --print-every 100 >/dev/null
  check "lora, 2 ranks: the weights of --accumulate 2" "same_tensors lora.accumulate.safetensors lora.ranks.safetensors"
  check "lora, 2 ranks: --accumulate 2's adapter folder" \
    "same_tensors peft.accumulate/adapter_model.safetensors peft.ranks/adapter_model.safetensors && cmp -s peft.accumulate/adapter_config.json peft.ranks/adapter_config.json"
fi
# Modules trained whole beside the adapters (--trainable, PEFT's modules_to_save): the final norm
# and the head go into the adapter folder under their modules' full names, as trained.
"$bin/mtc" "${shape[@]}" "${lora[@]}" --trainable '^norm|lm_head' -o lora.norm.plan --no-weights >/dev/null
train lora.norm.plan lora.norm lw0.safetensors --export-peft peft.norm
check "--export-peft with --trainable: modules_to_save, the trained norm and head in the folder" \
  "/usr/bin/python3 -c \"
import json, sys
sys.path.insert(0, '$e2e_dir')
import mt_reference as ref
config = json.load(open('peft.norm/adapter_config.json'))
ours, peft = ref.read_safetensors('lora.norm.safetensors'), ref.read_safetensors('peft.norm/adapter_model.safetensors')
assert config['modules_to_save'] == ['model.norm', 'lm_head'], config['modules_to_save']
assert ours['norm.weight'].equal(peft['base_model.model.model.norm.weight'])
assert ours['lm_head.weight'].equal(peft['base_model.model.lm_head.weight'])
assert len(peft) == 58, len(peft)
\""
# --export-peft refusals, before any step: a module both adapted and trained whole, a trained
# embedding the head is tied to, a stack of experts, a tensor on a module that holds others
# (gpt-oss's sinks on self_attn: PEFT would save them all); a folder --checkpoint-dir names too.
peft_refused() {
  local name=$1 want=$2
  shift 2
  rm -f peft.refused.plan
  if ! "$bin/mtc" "$@" -o peft.refused.plan --no-weights >/dev/null; then
    check "--export-peft of $name: the plan compiles" false
    return
  fi
  "$bin/mtrun" peft.refused.plan --data corpus.tok --steps 1 --export-peft peft.out > peft.refused 2>&1
  check "--export-peft of $name: refused before the run (exit $?)" \
    "[ $? -ne 0 ] && grep -q -- \"$want\" peft.refused && ! grep -q 'done:' peft.refused && [ ! -e peft.out ]"
}
peft_refused "a module adapted and trained whole" "which also has adapters" "${shape[@]}" "${lora[@]}" \
  --trainable 'attn\.q\.weight'
peft_refused "a trained embedding tied to the head" "is the embedding the LM head is tied to" llama-tiny --tied \
  --batch 2 --seq 32 --lora 4 --trainable '^embed'
peft_refused "a trained stack of experts" "one of a stack of experts" qwen3-moe-tiny --batch 2 --seq 32 --lora 4 \
  --trainable 'moe\.gate\.'
peft_refused "gpt-oss's sinks" "which holds other modules" gpt-oss-tiny --batch 2 --seq 32 --lora 4 \
  --trainable 'sinks'
"$bin/mtrun" lora.plan --data corpus.tok --steps 1 --checkpoint-dir shared --export-peft shared/ > peft.shared 2>&1
check "--export-peft and --checkpoint-dir in one folder: refused" \
  "grep -q 'name the same folder' peft.shared && [ ! -e shared ]"
# From weights without adapters (the model's own export): they start seeded, B zeros.
"$bin/mtrun" lora.plan --data corpus.tok --weights w0.safetensors --steps 2 --print-every 100 > lora.base.out 2>&1
check "lora from weights without adapters: it says so and trains" \
  "grep -q 'holds no LoRA adapters: the plan.s 56 start from their seeded initializers' lora.base.out"

# LoRA's dropout with rank-stabilised scaling (PEFT's lora_dropout, use_rslora; torch_parity's
# llama-tiny-lora-dropout draws the masks in PyTorch): a mask per adapted product, redrawn by a
# recompute, so resident and streamed-recompute under a budget agree bit for bit; 2 ranks draw
# --accumulate 2's masks; validation drops nothing (the plan without dropout scores the trained
# weights alike, bit for bit); the adapter folder's config says both.
dropout=(--lora 8 --lora-alpha 16 --lora-rslora --lora-targets 'attn\.|mlp\.')
"$bin/mtc" "${shape[@]}" "${dropout[@]}" --lora-dropout 0.1 --schedule resident -o drop.plan --no-weights > drop.txt
"$bin/mtc" "${shape[@]}" "${dropout[@]}" --lora-dropout 0.1 --device-mem 5MiB --schedule streamed-recompute \
  -o drop.tight.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${dropout[@]}" -o nodrop.plan --no-weights >/dev/null
check "lora dropout: the summary says so" \
  "grep -q 'the update x 5.65685, rank-stabilised: alpha / sqrt(r), dropout 0.1 before A' drop.txt"
rm -rf drop.peft
train drop.plan drop lw0.safetensors --export-peft drop.peft
train drop.tight.plan drop.tight lw0.safetensors
train nodrop.plan nodrop lw0.safetensors
check "lora dropout streamed-recompute: bit-identical losses" "cmp -s drop.loss drop.tight.loss"
check "lora dropout streamed-recompute: bit-identical weights" "same_tensors drop.safetensors drop.tight.safetensors"
check "lora dropout: the masks change the training" "! cmp -s drop.loss nodrop.loss"
val_loss() {
  "$bin/mtrun" "$1" --data corpus.tok --weights drop.safetensors --eval-only --log "$1.eval" >/dev/null &&
    grep -o '"val_loss":[^,}]*' "$1.eval"
}
check "lora dropout: validation drops nothing ($(val_loss drop.plan))" \
  "[ -n \"\$(val_loss drop.plan)\" ] && [ \"\$(val_loss drop.plan)\" = \"\$(val_loss nodrop.plan)\" ]"
check "lora dropout: the adapter folder's config" \
  "/usr/bin/python3 -c \"
import json
c = json.load(open('drop.peft/adapter_config.json'))
assert c['lora_dropout'] == 0.1 and c['use_rslora'] is True and c['lora_alpha'] == 16 and c['r'] == 8, c
\""
if command -v mpirun >/dev/null; then
  check "lora dropout, 2 ranks: the weights of --accumulate 2" "ranks_match_accumulate drop.plan drop lw0.safetensors"
fi
# DoRA (mtc --lora-dora, PEFT's use_dora; torch_parity's llama-tiny-dora* check the numbers,
# hf_peft the merge and the folders): the magnitudes start at the weights' row norms whether mtc
# wrote them or mtrun seeds them (lw0, the LoRA plan's weights, has none), so both trainings agree
# bit for bit; resident and streamed-recompute under a budget agree bit for bit, and so do 2 token
# tiles resident and under a smaller budget (which tiles); 2 ranks give --accumulate 2's weights; a
# bf16 plan learns; the adapter folder holds the 28 magnitudes and says use_dora.
dora=(--lora 8 --lora-alpha 16 --lora-dora --lora-targets 'attn\.|mlp\.')
"$bin/mtc" "${shape[@]}" "${dora[@]}" --schedule resident -o dora.plan --weights dw0.safetensors > dora.txt
"$bin/mtc" "${shape[@]}" "${dora[@]}" --device-mem 6MiB --schedule streamed-recompute -o dora.tight.plan \
  --no-weights > dora.tight.txt
"$bin/mtc" "${shape[@]}" "${dora[@]}" --token-tiles 2 --schedule resident -o dora.tiles.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" "${dora[@]}" --device-mem 4MiB --schedule streamed-recompute -o dora.tiles.tight.plan \
  --no-weights > dora.tiles.tight.txt
"$bin/mtc" "${shape[@]}" "${dora[@]}" --precision bf16 -o dora.bf16.plan --no-weights >/dev/null
check "dora: the summary says so" "grep -q 'lora *DoRA (a magnitude per output row), rank 8, alpha 16' dora.txt"
"$bin/mtc" "${shape[@]}" "${dora[@]}" --device-mem 5MiB --schedule streamed-recompute -o dora.5mib.plan \
  --no-weights > dora.5mib.txt
# One output-sized activation per adapted product (g * (y + update)), not two: 5 MiB takes the
# streamed plan without token tiles (PEFT's order needed them).
check "dora: 5 MiB streams without token tiles" "grep -q 'schedule streamed' dora.5mib.txt && ! grep -q 'token tiles' dora.5mib.txt"
check "dora: the budgets stream, the smaller in 2 token tiles" \
  "grep -q 'schedule streamed' dora.tight.txt && ! grep -q 'token tiles' dora.tight.txt && grep -q 'in 2 tiles' dora.tiles.tight.txt"
rm -rf dora.peft
train dora.plan dora dw0.safetensors --export-peft dora.peft
train dora.plan dora.seeded lw0.safetensors
train dora.tight.plan dora.tight dw0.safetensors
train dora.tiles.plan dora.tiles dw0.safetensors
train dora.tiles.tight.plan dora.tiles.tight dw0.safetensors
train dora.bf16.plan dora.bf16 dw0.safetensors --lr 1e-2
check "dora: magnitudes seeded by mtrun train as mtc's" "cmp -s dora.loss dora.seeded.loss && same_tensors dora.safetensors dora.seeded.safetensors"
"$bin/mtrun" dora.plan --data corpus.tok --weights lora.safetensors --steps 1 --print-every 100 > dora.from-lora.out 2>&1
check "dora from trained LoRA adapters: the magnitudes alone seeded, and said so" \
  "grep -q 'holds no DoRA magnitudes: the plan.s 28 start at their weights. row norms' dora.from-lora.out && ! grep -q 'holds no LoRA adapters' dora.from-lora.out"
check "dora streamed-recompute: bit-identical losses" "cmp -s dora.loss dora.tight.loss"
check "dora streamed-recompute: bit-identical weights" "same_tensors dora.safetensors dora.tight.safetensors"
check "dora token tiles streamed-recompute: bit-identical weights" \
  "same_tensors dora.tiles.safetensors dora.tiles.tight.safetensors"
check "dora bf16: it learns" "awk 'NR == 1 { first = \$1 } END { exit !(\$1 < first) }' dora.bf16.loss"
moved dw0.safetensors dora.safetensors > dora.moved
check "dora: the adapters and magnitudes move ($(wc -l < dora.moved) tensors)" \
  "[ \$(grep -c '\.lora_[AB]\.weight$' dora.moved) -eq 56 ] && [ \$(grep -c '\.lora_magnitude_vector$' dora.moved) -eq 28 ]"
check "dora: the adapter folder holds the magnitudes and says use_dora" \
  "/usr/bin/python3 -c \"
import json, struct
c = json.load(open('dora.peft/adapter_config.json'))
f = open('dora.peft/adapter_model.safetensors', 'rb'); n = struct.unpack('<Q', f.read(8))[0]
keys = [k for k in json.loads(f.read(n)) if k.endswith('.lora_magnitude_vector')]
assert c['use_dora'] is True and len(keys) == 28, (c['use_dora'], len(keys))
\""
if command -v mpirun >/dev/null; then
  check "dora, 2 ranks (magnitudes seeded): the weights of --accumulate 2" \
    "ranks_match_accumulate dora.plan dora lw0.safetensors"
fi
# Qwen3's q/k norms and biases are left where the expression finds them; a reward model's score
# head trains beside the adapters.
"$bin/mtc" qwen3-tiny --batch 2 --seq 32 --lora 4 --lora-targets 'attn\.|mlp\.' -o qwen3.lora.plan --no-weights \
  > qwen3.lora.txt 2>&1
check "lora on Qwen3: the projections alone (7 per layer)" "grep -q 'on 14 weights' qwen3.lora.txt"
"$bin/mtc" llama-tiny --batch 2 --seq 32 --objective reward --lora 4 -o rm.lora.plan --no-weights >/dev/null
"$bin/mtdump" rm.lora.plan > rm.lora.dump
check "lora on a reward model: its score head trains" "grep -q 'score.weight.exp_avg_sq' rm.lora.dump"

# Refusals: exit 1 naming the flag, nothing written.
refused() {
  local name=$1 want=$2 code=$3
  shift 3
  "$bin/mtc" "$@" -o refused.plan > refused.out 2>&1
  local rc=$?
  check "$name: exit $code ($rc)" "[ $rc -eq $code ]"
  check "$name: says '$want'" "grep -q -- '$want' refused.out"
  check "$name: nothing written" "[ ! -e refused.plan ]"
}
refused "a --frozen that matches nothing" "--frozen matches no parameter" 1 "${shape[@]}" --frozen 'self_attn'
refused "a --trainable that matches nothing" "--trainable matches no parameter" 1 "${shape[@]}" --trainable 'nothing'
refused "nothing left to train" "leaves no parameter to train" 1 "${shape[@]}" --frozen '.'
refused "--batch auto, nothing left to train" "leave no parameter to train" 1 llama-tiny --layers 4 --seq 32 \
  --batch auto --device-mem 64MiB --trainable 'layers' --frozen 'layers'
refused "--frozen with --forward-only" "excludes" 2 "${shape[@]}" --forward-only --frozen 'embed'
refused "--lora with --forward-only" "excludes" 2 "${shape[@]}" --forward-only --lora 4
refused "--lora-alpha without --lora" "requires" 2 "${shape[@]}" --lora-alpha 4
refused "--lora-targets that match nothing" "--lora-targets matches no parameter" 1 "${shape[@]}" --lora 4 \
  --lora-targets 'q_proj'
refused "LoRA targets with no weight among them" "finds no (out, in) weight" 1 "${shape[@]}" --lora 4 --lora-targets 'norm'
refused "a LoRA target read as a table" "a LoRA target must be a (out, in) weight read only as x W^T" 1 \
  "${shape[@]}" --tied --lora 4 --lora-targets '^embed'
echo 'not an onnx model' > m.onnx
refused "--lora on an ONNX model" "--lora adapts a built-in model" 1 m.onnx --lora 4
finish
