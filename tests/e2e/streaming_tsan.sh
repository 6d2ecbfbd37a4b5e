#!/usr/bin/env bash
# The resident, the streamed-recompute and the on-arrival plan run clean under ThreadSanitizer
# and still agree bit for bit: every cross-stream hazard has its event. So do the plan whose
# kept activations wait on the host, and the LM head in vocabulary chunks (row slices of one
# host tensor) resident and on arrival, untied and tied (its token embedding on the host), and
# the weights streamed as bf16 staging copies resident and streamed-recompute, a bf16 plan
# resident and offloaded on arrival, and token-tiled blocks resident and offloaded on arrival.
# So does a plan for ranks (mtc --ranks) in one process and on 2 MPI ranks (the exchange on the
# host optimizer's thread beside the stream threads), and an on-arrival plan on 2 MPI ranks.
# usage: streaming_tsan.sh BIN_DIR MTRUN_TSAN WORK_DIR
set -euo pipefail
bin=$1 mtrun_tsan=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
for i in $(seq 1 300); do echo "$i: the five boxing wizards jump quickly"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell TSAN_OPTIONS="halt_on_error=1 exitcode=66"
for schedule in resident streamed-recompute; do
  "$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --schedule $schedule -o $schedule.plan --weights w.safetensors >/dev/null
  "$mtrun_tsan" $schedule.plan --data corpus.tok --weights w.safetensors --steps 3 --log $schedule.jsonl \
    --print-every 100 --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $schedule.jsonl > $schedule.loss
done
# The on-arrival update: gradients land in one reused buffer while the host updates from it.
"$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --schedule streamed-recompute --update on-arrival -o arrival.plan \
  --no-weights >/dev/null
"$mtrun_tsan" arrival.plan --data corpus.tok --weights w.safetensors --steps 3 --log arrival.jsonl --print-every 100 \
  --grad-clip 0 >/dev/null
sed 's/.*"loss":\([^,]*\),.*/\1/' arrival.jsonl > arrival.loss
# Activations offloaded: copied out on the d2h stream, back on the h2d stream.
"$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --schedule streamed-recompute --offload-activations on \
  -o offload.plan --no-weights >/dev/null
"$mtrun_tsan" offload.plan --data corpus.tok --weights w.safetensors --steps 3 --log offload.jsonl --print-every 100 \
  --grad-clip 0 >/dev/null
sed 's/.*"loss":\([^,]*\),.*/\1/' offload.jsonl > offload.loss
for plan in split-resident split-arrival; do
  [ $plan = split-resident ] && flags=(--schedule resident) || flags=(--schedule streamed-recompute --update on-arrival)
  "$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --vocab-chunks 3 "${flags[@]}" -o $plan.plan --no-weights >/dev/null
  "$mtrun_tsan" $plan.plan --data corpus.tok --weights w.safetensors --steps 3 --log $plan.jsonl --print-every 100 \
    --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $plan.jsonl > $plan.loss
done
# A tied head in vocabulary chunks, its token embedding on the host: the host looks the tokens
# up and scatter-adds their rows' gradient onto the head's landed chunks.
for plan in tied-resident tied-arrival; do
  [ $plan = tied-resident ] && flags=(--schedule resident --weights wt.safetensors) ||
    flags=(--schedule streamed-recompute --update on-arrival --no-weights)
  "$bin/mtc" llama-tiny --tied --layers 3 --batch 2 --seq 16 --vocab-chunks 3 "${flags[@]}" -o $plan.plan >/dev/null
  "$mtrun_tsan" $plan.plan --data corpus.tok --weights wt.safetensors --steps 3 --log $plan.jsonl --print-every 100 \
    --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $plan.jsonl > $plan.loss
done
# Weights streamed as bf16 staging copies: the host rounds each updated master into its copy
# while the h2d stream reads the copies of the parameters before it.
for plan in bf16-resident bf16-streamed; do
  [ $plan = bf16-resident ] && flags=(--schedule resident) || flags=(--schedule streamed-recompute)
  "$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --stream-dtype bf16 "${flags[@]}" -o $plan.plan --no-weights \
    >/dev/null
  "$mtrun_tsan" $plan.plan --data corpus.tok --weights w.safetensors --steps 3 --log $plan.jsonl --print-every 100 \
    --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $plan.jsonl > $plan.loss
done
# A bf16 plan (mt-mixed-precision): the CPU's emulation of bf16 storage on every stream thread,
# the offloaded activations crossing as bf16, on arrival.
for plan in mixed-resident mixed-offload; do
  [ $plan = mixed-resident ] && flags=(--schedule resident) ||
    flags=(--schedule streamed-recompute --offload-activations on --update on-arrival)
  "$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --precision bf16 "${flags[@]}" -o $plan.plan --no-weights \
    >/dev/null
  "$mtrun_tsan" $plan.plan --data corpus.tok --weights w.safetensors --steps 3 --log $plan.jsonl --print-every 100 \
    --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $plan.jsonl > $plan.loss
done
# Token tiles (mt-tile-tokens): the tiles of a whole made in place in its bytes, each tile
# recomputed before its backward, resident and offloaded on arrival.
for plan in tiles-resident tiles-arrival; do
  [ $plan = tiles-resident ] && flags=(--schedule resident --weights wtiles.safetensors) ||
    flags=(--schedule streamed-recompute --offload-activations on --update on-arrival --no-weights)
  "$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 64 --token-tiles 4 "${flags[@]}" -o $plan.plan >/dev/null
  "$mtrun_tsan" $plan.plan --data corpus.tok --weights wtiles.safetensors --steps 3 --log $plan.jsonl \
    --print-every 100 --grad-clip 0 >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' $plan.jsonl > $plan.loss
done
# A plan for ranks (mtc --ranks 2): its gradients land in a reused buffer, each copied apart by
# the host task that takes its norm while the d2h stream lands the next ones — in one process
# with --accumulate 2, and on 2 MPI ranks, whose exchanges run on the host optimizer's thread
# beside the stream threads (the same losses).
"$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --schedule streamed-recompute --ranks 2 -o landed.plan --no-weights \
  >/dev/null
landed=(landed.plan --data corpus.tok --weights w.safetensors --steps 3 --print-every 100 --grad-clip 0)
"$mtrun_tsan" "${landed[@]}" --accumulate 2 --log landed-acc.jsonl >/dev/null
command -v mpirun >/dev/null || { echo "FAIL: no mpirun (bash tools/setup.sh installs openmpi-bin)"; exit 1; }
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
  mpirun -np 2 --bind-to none "$mtrun_tsan" "${landed[@]}" --log landed-np.jsonl >/dev/null
# The on-arrival update on 2 MPI ranks: each gradient exchanged as it lands, the owners updating
# their slices while the streams run on.
"$bin/mtc" llama-tiny --layers 3 --batch 2 --seq 16 --schedule streamed-recompute --update on-arrival -o arrival-np.plan \
  --no-weights >/dev/null
arrival_np=(arrival-np.plan --data corpus.tok --weights w.safetensors --steps 3 --print-every 100 --grad-clip 0)
"$mtrun_tsan" "${arrival_np[@]}" --accumulate 2 --log arrival-acc.jsonl >/dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 \
  mpirun -np 2 --bind-to none "$mtrun_tsan" "${arrival_np[@]}" --log arrival-np.jsonl >/dev/null
for run in landed-acc landed-np arrival-acc arrival-np; do sed 's/.*"loss":\([^,]*\),.*/\1/' $run.jsonl > $run.loss; done
cmp resident.loss streamed-recompute.loss || { echo "0 passed, 1 failed: losses differ"; exit 1; }
cmp resident.loss arrival.loss || { echo "1 passed, 1 failed: on-arrival losses differ"; exit 1; }
cmp resident.loss offload.loss || { echo "2 passed, 1 failed: offloaded losses differ"; exit 1; }
cmp split-resident.loss split-arrival.loss || { echo "3 passed, 1 failed: vocabulary-split losses differ"; exit 1; }
cmp tied-resident.loss tied-arrival.loss || { echo "4 passed, 1 failed: tied vocabulary-split losses differ"; exit 1; }
cmp bf16-resident.loss bf16-streamed.loss || { echo "5 passed, 1 failed: bf16-staged losses differ"; exit 1; }
cmp mixed-resident.loss mixed-offload.loss || { echo "6 passed, 1 failed: bf16-plan losses differ"; exit 1; }
cmp tiles-resident.loss tiles-arrival.loss || { echo "7 passed, 1 failed: token-tiled losses differ"; exit 1; }
[ -s landed-acc.loss ] && cmp landed-acc.loss landed-np.loss ||
  { echo "8 passed, 1 failed: the plan for ranks: 2 ranks' losses differ from --accumulate 2's"; exit 1; }
[ -s arrival-acc.loss ] && cmp arrival-acc.loss arrival-np.loss ||
  { echo "9 passed, 1 failed: on arrival, 2 ranks' losses differ from --accumulate 2's"; exit 1; }
echo "10 passed, 0 failed"
