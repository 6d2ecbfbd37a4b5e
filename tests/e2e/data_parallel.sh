#!/usr/bin/env bash
# Data parallel over MPI ranks (issue 31; docs/distributed.md): `mpirun -np N mtrun` trains bit
# for bit as one process with --accumulate N — every step's loss and norm in the log, the first
# step's gradients and the weights after 6 steps — for 2 and 3 ranks (3 oversubscribe this 2-core
# machine), resident, streamed, bf16 and on-arrival plans, and data with a loss mask (each rank's
# gradient weighed by its counted targets) or of packed examples (each rank the step's next packed
# rows); validation sharded over the ranks gives one process's held-out loss. The AdamW moments are sharded (each rank holds and updates a slice): a rank holds
# less than one process. A checkpoint written by 2 ranks is one process's and resumes in one
# process with --accumulate 2 to the same weights, on 3 ranks as --accumulate 3. Only rank 0
# prints and writes. Ranks that disagree (another flag) are refused naming the rank and the
# field. --accumulate K on N ranks is one process's --accumulate N·K. A plan for ranks (mtc
# --ranks) keeps only each rank's slice of the summed gradients, the same training. A rank killed mid-run ends
# the job within a minute, a rank stopped (alive but silent) after --rank-timeout; another data
# file of as many tokens is refused. SIGUSR1 to mpirun (or SIGTERM to one rank) stops the job
# after one step on every rank with one checkpoint, which resumes to an unstopped run's weights.
# mtc --ranks --batch auto sizes each rank's batch against a host's bytes.
# usage: data_parallel.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
command -v mpirun >/dev/null || { echo "FAIL: no mpirun (bash tools/setup.sh installs openmpi-bin)"; exit 1; }
# Shared memory between the ranks of this machine only; root allowed (CI runs as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader \
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
ranks() { local n=$1; shift; mpirun -np "$n" --bind-to none "$@"; }
make_corpus

shape=(llama-tiny --layers 2 --batch 2 --seq 32)
"$bin/mtc" "${shape[@]}" --schedule resident -o resident.plan --weights w0.safetensors >/dev/null
"$bin/mtc" "${shape[@]}" --schedule streamed -o streamed.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" --precision bf16 -o bf16.plan --no-weights >/dev/null
"$bin/mtc" "${shape[@]}" --update on-arrival -o arrival.plan --no-weights >/dev/null

# run NAME RANKS|-ACCUMULATE PLAN [flags]: 6 steps; NAME.jsonl, NAME.safetensors, NAME.grads.safetensors
# (none for an on-arrival plan: it keeps no gradient).
run() {
  local name=$1 how=$2 plan=$3
  shift 3
  local cmd=("$bin/mtrun" "$plan" --data corpus.tok --weights w0.safetensors --steps 6 --log "$name.jsonl"
             --export "$name.safetensors" --print-every 100 "$@")
  [ "$plan" = arrival.plan ] || cmd+=(--dump-grads "$name.grads.safetensors")
  if [ "$how" -lt 0 ]; then "${cmd[@]}" --accumulate $((-how)) > "$name.out"; else ranks "$how" "${cmd[@]}" > "$name.out"; fi
}
# same NAME_A NAME_B WHAT: the logs' losses and norms (less the times), the gradients (where
# dumped) and the weights bit for bit.
untimed() { sed 's/"step_ms":[^,]*,//; s/,"tokens_per_s":[^}]*//' "$1"; }
same() {
  check "$3: the same losses and norms" "cmp -s <(untimed $1.jsonl) <(untimed $2.jsonl) && [ -s $1.jsonl ]"
  [ -e $1.grads.safetensors ] &&
    check "$3: the same first-step gradients" "same_tensors $1.grads.safetensors $2.grads.safetensors"
  check "$3: the same weights" "same_tensors $1.safetensors $2.safetensors"
}
# With validation every 3 steps: each rank runs its share of the held-out batches, the loss
# summed in batch order (the logs hold it).
for n in 2 3; do
  run acc$n -$n resident.plan --val-fraction 0.2 --val-every 3
  run np$n $n resident.plan --val-fraction 0.2 --val-every 3
  same acc$n np$n "$n ranks = --accumulate $n (resident, validated)"
done
# A mixture of experts trained with its router's load-balancing loss: the log's auxiliary loss
# and choices per expert are every rank's, as one process's.
"$bin/mtc" qwen3-moe-tiny --layers 2 --batch 2 --seq 32 --router-aux-loss 0.02 -o moe.plan --weights moe0.safetensors \
  >/dev/null
moe_run=("$bin/mtrun" moe.plan --data corpus.tok --weights moe0.safetensors --steps 4 --print-every 100)
"${moe_run[@]}" --accumulate 2 --log moe_acc.jsonl --export moe_acc.safetensors > moe_acc.out
ranks 2 "${moe_run[@]}" --log moe_np.jsonl --export moe_np.safetensors > moe_np.out
same moe_acc moe_np "a mixture of experts with its load-balancing loss: 2 ranks = --accumulate 2"
check "its log holds each step's choices per expert, over both ranks' micro-batches (2 x 64 tokens x 2 x 2 layers)" \
  "/usr/bin/python3 -c 'import json, sys; sys.exit(not all(sum(json.loads(l)[\"expert_tokens\"]) == 512 for l in open(\"moe_np.jsonl\")))'"
check "the logs hold the validations" "[ \"\$(grep -c val_loss np3.jsonl)\" -eq 2 ]"
check "only rank 0 prints" "[ \"\$(grep -c 'done:' np3.out)\" -eq 1 ] && grep -q 'data parallel over 3 ranks' np3.out"
check "the bound of a rank's waits is said (auto: 600 s until a step is done, then 60 s + 4 steps)" \
  "grep -q 'a rank waits for the others at most 600 s until the first step is done, then 60 s + 4x the slowest step (--rank-timeout auto)' np3.out"
check "the host bytes per rank and per host are said" \
  "grep -Eq 'host memory: [0-9.]+ to [0-9.]+ MiB per rank .*, [0-9.]+ MiB on rank 0.s host \(3 ranks\); 1 host' np3.out"
# The moments sharded: each rank holds less than one process (16 bytes/param here), the host
# less than 3 of them.
one=$(sed -n 's/^  host \([0-9.]*\) MiB.*/\1/p' acc3.out)
most=$(sed -n 's/.*host memory: [0-9.]* to \([0-9.]*\) MiB per rank.*/\1/p' np3.out)
on_host=$(sed -n 's/.*, \([0-9.]*\) MiB on rank 0.s host.*/\1/p' np3.out)
check "sharded, one host copy: each of 3 ranks holds at most 2/3 of one process's host bytes ($most of $one MiB), the host 1.6 ($on_host)" \
  "awk -v o=$one -v m=$most -v h=$on_host 'BEGIN { exit !(m <= 0.67 * o && h <= 1.6 * o) }' && grep -q 'one copy of the master weights per host' np3.out"
for plan in streamed bf16; do
  run $plan.acc -2 $plan.plan
  run $plan.np 2 $plan.plan
  same $plan.acc $plan.np "2 ranks = --accumulate 2 ($plan)"
done
run arrival.acc -2 arrival.plan --grad-clip 0
run arrival.np 2 arrival.plan --grad-clip 0
same arrival.acc arrival.np "2 ranks = --accumulate 2 (on-arrival)"
# 3 ranks (oversubscribed): slices of uneven sizes, the bf16 plan's split masters and the
# on-arrival update's too.
run bf16.acc3 -3 bf16.plan
run bf16.np3 3 bf16.plan
same bf16.acc3 bf16.np3 "3 ranks = --accumulate 3 (bf16)"
run arrival.acc3 -3 arrival.plan --grad-clip 0
run arrival.np3 3 arrival.plan --grad-clip 0
same arrival.acc3 arrival.np3 "3 ranks = --accumulate 3 (on-arrival)"

# A loss mask: each rank's gradient weighs by its counted targets, as each micro-batch's does.
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$e2e_dir')
import mt_reference as ref
ids = ref.read_tokens('corpus.tok')
ref.write_tokens('masked.tok', ids, 256, [(i // 7) % 3 != 0 for i in range(len(ids))])"
run masked.acc -2 resident.plan --data masked.tok
run masked.np 2 resident.plan --data masked.tok
same masked.acc masked.np "2 ranks = --accumulate 2 (loss mask)"
# Packed examples: each rank's micro-batch holds the step's next rows of the packed passes.
"$bin/mtc" "${shape[@]}" --schedule resident --packed-examples -o packed.plan --no-weights >/dev/null
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$e2e_dir')
import mt_reference as ref
ref.write_example_corpus('corpus.tok', 'examples.tok')"
run packed.acc -2 packed.plan --data examples.tok --rows packed-examples
run packed.np 2 packed.plan --data examples.tok --rows packed-examples
same packed.acc packed.np "2 ranks = --accumulate 2 (packed examples)"
# mtc --ranks prices the same: its host bytes per host are mtrun's (within page rounding).
"$bin/mtc" "${shape[@]}" --schedule resident --ranks 3 -o priced.plan --no-weights > priced.out
predicted=$(sed -n 's/.*, \([0-9.]*\) MiB per host;.*/\1/p' priced.out)
check "mtc --ranks 3 predicts the host's bytes mtrun measured ($predicted vs $on_host MiB)" \
  "awk -v p=$predicted -v h=$on_host 'BEGIN { exit !(p >= 0.95 * h && p <= 1.05 * h) }'"
check "... and the job's step: bound by the devices (this plan on one host)" \
  "grep -q 'job step .*bound by the devices' priced.out"
# The job's step bound by what is busiest: a slow link between hosts bounds it (and mtc says so);
# with NVLink (h100-pcie5's profile) the devices' collectives are priced beside it.
"$bin/mtc" "${shape[@]}" --schedule resident --ranks 4 --ranks-per-host 2 --hw h100-pcie5,net-gbps=0.0001 \
  -o slow.plan --no-weights > slow.out
check "mtc --ranks 4 on 2 hosts over a slow link: the network bounds the job's step" \
  "grep -q 'job step .*bound by the network between hosts, not the GPUs' slow.out && grep -q 'with NCCL .*over NVLink' slow.out"
# --host-mem bounds each host of the job: 3 ranks of one host need more than one process.
"$bin/mtc" "${shape[@]}" --schedule resident --host-mem 2.5MiB -o fits.plan --no-weights > fits.out
check "one process fits in 2.5 MiB of host memory" "[ \$? -eq 0 ]"
"$bin/mtc" "${shape[@]}" --schedule resident --host-mem 2.5MiB --ranks 3 -o tight.plan --no-weights > tight.out 2> tight.err
check "... 3 ranks on that host do not: refused naming the host's bytes" \
  "[ \$? -ne 0 ] && grep -q 'each host of the 3-rank job needs 2.9 MiB of host memory' tight.err && [ ! -e tight.plan ]"
# --batch auto per rank: each rank's batch sized against the device, the host's bytes (its ranks
# together) against --host-mem: 2.3 MiB holds one process's plan, not 3 ranks of it.
auto=(llama-tiny --layers 2 --seq 32 --batch auto --device-mem 4MiB --host-mem 2.3MiB --no-weights)
"$bin/mtc" "${auto[@]}" -o auto1.plan > auto1.out 2>&1
"$bin/mtc" "${auto[@]}" --ranks 3 -o auto3.plan > auto3.out 2>&1
check "--batch auto with --ranks 3: refused where one process fits, naming a host's bytes" \
  "[ \$? -eq 1 ] && grep -q '^  batch [0-9]* x seq 32' auto1.out && grep -q 'not even batch 1 .* of host memory per host, its 3 ranks together' auto3.out && [ ! -e auto3.plan ]"
"$bin/mtc" "${auto[@]/2.3MiB/8MiB}" --ranks 2 -o auto2.plan > auto2.out 2>&1
per_rank=$(sed -n 's/^  batch \([0-9]*\) x seq 32 = \([0-9]*\) tokens\/step.*/\2/p' auto2.out)
check "... with room, each of 2 ranks its batch ($per_rank tokens), 2 of them an update" \
  "[ -n '$per_rank' ] && grep -q 'data parallel  2 ranks (--ranks), 2 per host on 1 host: 2 x $per_rank tokens per update' auto2.out"
"$bin/mtc" "${shape[@]}" --ranks 3 --ranks-per-host 2 -o odd.plan --no-weights > odd.out 2> odd.err
check "mtc --ranks 3 --ranks-per-host 2 is refused (exit 2)" "[ \$? -eq 2 ] && grep -q 'whole number of hosts' odd.err"
# A plan for ranks (mtc --ranks 3): a streamed plan's gradients land in a buffer of a few blocks'
# and each rank keeps only its slice of each summed gradient (ZeRO-2 over host memory) — the
# same training bit for bit on 3 ranks and in one process; less host memory than the plan that
# keeps whole gradients, as mtc predicts. A tied head in vocabulary chunks on 2 ranks too (its
# gradient's rows scattered by the host into the landing buffer).
"$bin/mtc" "${shape[@]}" --schedule streamed --ranks 3 -o landed.plan --no-weights > landed.plan.out
run streamed.acc3 -3 streamed.plan
run landed.np 3 landed.plan
run landed.acc -3 landed.plan
same streamed.acc3 landed.np "a plan for 3 ranks (gradients kept apart) on 3 ranks = the streamed plan's --accumulate 3"
same streamed.acc3 landed.acc "... in one process with --accumulate 3"
landed_host=$(sed -n 's/.*, \([0-9.]*\) MiB on rank 0.s host.*/\1/p' landed.np.out)
landed_predicted=$(sed -n 's/.*, \([0-9.]*\) MiB per host;.*/\1/p' landed.plan.out)
check "... its host holds less than with whole gradients ($landed_host vs $on_host MiB), as mtc --ranks 3 predicts ($landed_predicted)" \
  "awk -v l=$landed_host -v h=$on_host -v p=$landed_predicted 'BEGIN { exit !(l < 0.9 * h && p >= 0.95 * l && p <= 1.05 * l) }' && grep -q 'moments and summed gradients sharded' landed.np.out"
tied=(llama-tiny --tied --layers 2 --batch 2 --seq 32 --vocab-chunks 3 --schedule streamed-recompute)
"$bin/mtc" "${tied[@]}" -o tied.plan --no-weights >/dev/null
"$bin/mtc" "${tied[@]}" --ranks 2 -o tied-landed.plan --no-weights >/dev/null
run tied.acc -2 tied.plan
run tied.np 2 tied-landed.plan
same tied.acc tied.np "a tied head in vocabulary chunks, gradients kept apart: 2 ranks = --accumulate 2"

# Two hosts of two ranks (MT_RANKS_PER_HOST=2 on this machine): each host's copy is completed
# from the other's (each rank from its peer), a bf16 plan's split masters too.
run hosts.acc -4 bf16.plan
MT_RANKS_PER_HOST=2 run hosts.np 4 bf16.plan
same hosts.acc hosts.np "2 hosts of 2 ranks = --accumulate 4 (bf16)"
check "... said at start" "grep -q '(2 ranks); 2 host(s)' hosts.np.out"
# --accumulate K on N ranks: micro-step k of rank r is micro-batch k·N + r of --accumulate N·K.
run masked.acc4 -4 resident.plan --data masked.tok
run masked.np2x2 2 resident.plan --data masked.tok --accumulate 2
same masked.acc4 masked.np2x2 "2 ranks with --accumulate 2 = --accumulate 4 (loss mask)"
check "... said at start" "grep -q 'micro-batches r, r + 2, ... (2 of them) of each step (8 sequences per update)' masked.np2x2.out"
run arrival.acc4 -4 arrival.plan --grad-clip 0
run arrival.np2x2 2 arrival.plan --grad-clip 0 --accumulate 2
same arrival.acc4 arrival.np2x2 "2 ranks with --accumulate 2 = --accumulate 4 (on-arrival)"

# A checkpoint written by 2 ranks (each moment gathered from its 2 owners) is the file one process
# with --accumulate 2 writes, --keep-best's too; it resumes in one process with --accumulate 2
# to the same weights, and on 3 ranks (other slices) as one process with --accumulate 3 does.
ckpt=(resident.plan --data corpus.tok --weights w0.safetensors --steps 6 --checkpoint-every 3 --print-every 100
      --val-fraction 0.2 --val-every 3 --keep-best)
ranks 2 "$bin/mtrun" "${ckpt[@]}" --checkpoint-dir ck --export straight.safetensors > ck.out
"$bin/mtrun" "${ckpt[@]}" --checkpoint-dir ck1 --accumulate 2 > ck1.out
check "2 ranks' checkpoint = one process's with --accumulate 2 (weights and moments)" \
  "same_tensors ck/step-000000003.ckpt.safetensors ck1/step-000000003.ckpt.safetensors"
check "... and --keep-best's" "same_tensors ck/best.ckpt.safetensors ck1/best.ckpt.safetensors"
rm -f ck/step-000000006.ckpt.safetensors  # resume from step 3's
cp -r ck ck3
cp -r ck ck3acc
resume=(resident.plan --data corpus.tok --steps 6 --val-fraction 0.2 --print-every 100)
"$bin/mtrun" "${resume[@]}" --resume ck --accumulate 2 --export resumed.safetensors > resumed.out
check "2 ranks' checkpoint at step 3, resumed with --accumulate 2: the same weights at step 6" \
  "same_tensors straight.safetensors resumed.safetensors"
ranks 3 "$bin/mtrun" "${resume[@]}" --resume ck3 --export resumed3.safetensors > resumed3.out
"$bin/mtrun" "${resume[@]}" --resume ck3acc --accumulate 3 --export resumed3acc.safetensors > resumed3acc.out
check "... resumed on 3 ranks: as one process with --accumulate 3" \
  "same_tensors resumed3.safetensors resumed3acc.safetensors"

# Refusals.
mpirun -np 1 "$bin/mtrun" resident.plan --data corpus.tok --steps 2 --lr 1e-3 : \
  -np 1 "$bin/mtrun" resident.plan --data corpus.tok --steps 2 --lr 2e-3 > mismatch.out 2> mismatch.err
check "ranks with other flags are refused" \
  "[ \$? -ne 0 ] && grep -q 'rank 1 runs another flags than rank 0' mismatch.err"
# A rank whose flags do not parse (exit 2) ends the job at once: the others were left waiting for
# it until --rank-timeout.
timeout 60 mpirun -np 1 "$bin/mtrun" resident.plan --data corpus.tok --steps 2 : \
  -np 1 "$bin/mtrun" resident.plan --data corpus.tok --steps 2 --bogus > badflag.out 2> badflag.err
check "a rank with a flag that does not parse ends the job at once (exit 2)" \
  "[ \$? -eq 2 ] && grep -q 'The following argument was not expected: --bogus' badflag.err"
# Another data file of as many tokens (what a stale copy on another host would be): refused by
# its checksum, naming the rank and the field.
/usr/bin/python3 -c "
import sys; sys.path.insert(0, '$e2e_dir')
import mt_reference as ref
ids = ref.read_tokens('corpus.tok')
ref.write_tokens('other.tok', list(reversed(ids)), 256)"
mpirun -np 1 "$bin/mtrun" resident.plan --data corpus.tok --steps 2 : \
  -np 1 "$bin/mtrun" resident.plan --data other.tok --steps 2 > otherdata.out 2> otherdata.err
check "ranks reading another data file of as many tokens are refused" \
  "[ \$? -ne 0 ] && grep -q 'rank 1 runs another data (tokens and CRC-32C of --data) than rank 0' otherdata.err"
# A rank that fails alone (rank 0's log cannot be written) ends the job (MPI_Abort), not waits.
touch not-a-folder
timeout 60 bash -c "$(declare -f ranks); ranks 2 '$bin/mtrun' resident.plan --data corpus.tok --steps 2 \
  --log not-a-folder/log.jsonl" > alone.out 2> alone.err
code=$?
check "a rank failing alone ends the job with its error" \
  "[ $code -ne 0 ] && [ $code -ne 124 ] && grep -q 'mtrun (rank 0): error: .*not-a-folder' alone.err"
# rank_pid TAG RANK: the pid of rank RANK of the job whose command line holds TAG (its environment
# says its rank: mpirun's own command line holds TAG too).
rank_pid() {
  local p
  for p in $(pgrep -f "mtrun resident.plan .*$1"); do
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo $p; return; }
  done
}
# trained LOG: wait (up to a minute) until LOG holds 3 steps: the ranks are mid-run.
trained() {
  for _ in $(seq 1 300); do [ "$(wc -l 2>/dev/null < "$1")" -ge 3 ] 2>/dev/null && return 0; sleep 0.2; done
  return 1
}
# ended JOB TAG SECONDS: JOB's exit status once it ends, within SECONDS; past them (a job that
# would run on: a signal not delivered), it and its ranks (command lines holding TAG) are
# killed, and the status is 124.
ended() {
  local job=$1 tag=$2
  for _ in $(seq 1 "$3"); do kill -0 "$job" 2>/dev/null || { wait "$job"; return; }; sleep 1; done
  kill -9 "$job" 2>/dev/null; pkill -9 -f "mtrun resident.plan .*$tag"; wait "$job" 2>/dev/null
  return 124
}
# A rank killed mid-run: the job ends (mpirun sees it) within a minute, not hanging.
ranks 2 "$bin/mtrun" resident.plan --data corpus.tok --steps 100000 --print-every 100000 --log killed.jsonl \
  > killed.out 2> killed.err &
job=$!
trained killed.jsonl
victim=$(rank_pid killed.jsonl 1)
kill -9 "$victim"
ended $job killed.jsonl 60
code=$?
check "a rank killed mid-run (rank 1, pid ${victim:-none}) ends the job within a minute" "[ -n '$victim' ] && [ $code -ne 124 ]"
check "... with a failing exit, mpirun naming the rank" \
  "[ $code -ne 0 ] && grep -q 'process rank 1 .*exited on signal 9' killed.err"
kill -9 $job 2>/dev/null
# A rank stopped (alive, silent): the other waits --rank-timeout seconds for it, then ends the job.
ranks 2 "$bin/mtrun" resident.plan --data corpus.tok --steps 100000 --print-every 100000 --rank-timeout 3 \
  > stopped.out 2> stopped.err &
job=$!
sleep 4
victim=$(pgrep -f "mtrun resident.plan --data corpus.tok --steps 100000 --print-every 100000 --rank-timeout" | tail -1)
kill -STOP "$victim"
for _ in $(seq 1 30); do kill -0 $job 2>/dev/null || break; sleep 1; done
check "a stopped rank ends the job after --rank-timeout" "! kill -0 $job 2>/dev/null"
check "... saying why" "grep -q 'waited 3 s in MPI_.* for the other ranks: one of them hung, was stopped' stopped.err"
kill -9 $job "$victim" 2>/dev/null
# Rank 0 stopped while it writes a checkpoint every step: rank 1, waiting for its file or in a
# collective, ends the job too (the checkpoint's wait is bounded by --rank-timeout and the time
# its bytes take at 10 MB/s), and the last published checkpoint loads.
ranks 2 "$bin/mtrun" resident.plan --data corpus.tok --steps 100000 --print-every 100000 --rank-timeout 3 \
  --checkpoint-every 1 --checkpoint-dir ckstop > stopped0.out 2> stopped0.err &
job=$!
sleep 4
victim=
for p in $(pgrep -f "mtrun resident.plan .*--checkpoint-dir ckstop"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=0 && victim=$p
done
kill -STOP "$victim"
for _ in $(seq 1 30); do kill -0 $job 2>/dev/null || break; sleep 1; done
check "rank 0 stopped while writing checkpoints ends the job within 30 s" "[ -n '$victim' ] && ! kill -0 $job 2>/dev/null"
check "... rank 1 saying why" "grep -q 'mtrun (rank 1): waited [0-9]* s in MPI_' stopped0.err"
kill -9 $job "$victim" 2>/dev/null
last=$(ls ckstop | sed -n 's/^step-0*\([0-9][0-9]*\)\.ckpt\.safetensors$/\1/p' | sort -n | tail -1)
"$bin/mtrun" resident.plan --data corpus.tok --resume ckstop --steps $((${last:-0} + 1)) --print-every 100 > ckstop.out 2>&1
check "... its last published checkpoint (step ${last:-none}) resumes and trains a step" \
  "[ $? -eq 0 ] && [ -n '$last' ] && grep -q 'resuming from ckstop/step-0*$last.ckpt.safetensors: step $last done' ckstop.out && grep -q 'done: 1 steps' ckstop.out"

# Stopping the job with a checkpoint: SIGUSR1 to mpirun (which forwards it as it is; SIGTERM and
# SIGINT it follows with SIGKILL a second later, too soon for a real model's checkpoint). The ranks
# stop after the same step, rank 0 checkpoints once, the job exits 0; resumed to 2 more steps, the
# weights are those of a run never stopped (a constant learning rate: no schedule to differ).
steady=(resident.plan --data corpus.tok --weights w0.safetensors --print-every 100000 --min-lr-ratio 1)
mpirun -np 2 --bind-to none "$bin/mtrun" "${steady[@]}" --steps 100000 --log usr1.jsonl --checkpoint-dir ckusr1 \
  > usr1.out 2> usr1.err &  # mpirun itself, not a shell around it, gets the signal
job=$!
trained usr1.jsonl
kill -USR1 $job
ended $job usr1.jsonl 60
code=$?
stopped=$(sed -n 's/^stopped by SIGUSR1 after step \([0-9]*\); resume with --resume$/\1/p' usr1.out)
check "SIGUSR1 to mpirun: the job stops after step ${stopped:-none} with one checkpoint, exit 0" \
  "[ $code -eq 0 ] && [ -n '$stopped' ] && [ \"\$(ls ckusr1)\" = step-$(printf %09d ${stopped:-0}).ckpt.safetensors ]"
ranks 2 "$bin/mtrun" "${steady[@]}" --steps $((${stopped:-0} + 2)) --resume ckusr1 --export usr1.resumed.safetensors \
  > usr1.resumed.out
ranks 2 "$bin/mtrun" "${steady[@]}" --steps $((${stopped:-0} + 2)) --export usr1.straight.safetensors > usr1.straight.out
check "... resumed for 2 more steps: the weights of a run never stopped" \
  "same_tensors usr1.straight.safetensors usr1.resumed.safetensors"
# SIGTERM to one rank alone (as a scheduler may deliver it): every rank stops after the same
# step, rank 0 naming the signal and checkpointing.
ranks 2 "$bin/mtrun" "${steady[@]}" --steps 100000 --log term1.jsonl --checkpoint-dir ckterm1 > term1.out 2> term1.err &
job=$!
trained term1.jsonl
victim=$(rank_pid term1.jsonl 1)
kill -TERM "$victim"
ended $job term1.jsonl 60
code=$?
check "SIGTERM to rank 1 alone: the job stops with rank 0's checkpoint, exit 0" \
  "[ -n '$victim' ] && [ $code -eq 0 ] && grep -q '^stopped by SIGTERM after step [0-9]*; resume with --resume' term1.out && [ \"\$(ls ckterm1 | wc -l)\" -eq 1 ]"
finish
