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

/usr/bin/python3 - w0.safetensors > frozen.names <<'EOF'
import json, re, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
print("\n".join(k for k in header if k != "__metadata__" and not re.search(r"layers\.[23]\.|^norm\.", k)))
EOF
# unchanged NAME: the frozen tensors of NAME.safetensors are w0's, byte for byte.
unchanged() {
  /usr/bin/python3 - w0.safetensors "$1.safetensors" frozen.names <<'EOF'
import json, struct, sys
def tensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
            for k, e in header.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
names = open(sys.argv[3]).read().split()
changed = [k for k in names if a[k] != b[k]]
print(f"changed: {changed}" if changed else "", end="")
sys.exit(1 if changed or len(names) < 10 else 0)
EOF
}
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
finish
