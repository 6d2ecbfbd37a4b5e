#!/usr/bin/env bash
# The fault matrix of a training run (issue 18 #7, #9, #10; #19's signal stop): two runs on one
# checkpoint directory, temporary files of killed writers, a full disk for checkpoints and logs,
# output paths that cannot be written, a token file truncated or rewritten under the run, and
# SIGINT with and without a place to keep the progress, and transfers to the device corrupted on
# their way (--verify-transfers). Each gives one clear error (or the kept
# progress), a non-zero exit where work is lost, the previous checkpoint intact, nothing half-written.
# usage: run_faults.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
wait_for_lines() { for _ in $(seq 1 600); do [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return; sleep 0.05; done; }
make_corpus
"$bin/mtc" gpt2-tiny --batch 4 --seq 32 -o m.plan >/dev/null
long=(m.plan --data corpus.tok --steps 100000 --print-every 100000)
run() { "$bin/mtrun" m.plan --data corpus.tok --print-every 1000 "$@"; }

# Two runs on one --checkpoint-dir: the second is refused and names the first.
"$bin/mtrun" "${long[@]}" --log first.jsonl --checkpoint-dir shared >/dev/null &
first=$!
wait_for_lines first.jsonl 3
err=$(run --steps 2 --checkpoint-dir shared 2>&1 >/dev/null); status=$?
check "a second run on a held checkpoint directory is refused, naming the holder (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q 'checkpoint directory shared is in use by mtrun (pid $first on' <<<\"\$err\""
kill -TERM $first; wait $first
check "the first run kept its checkpoint" "ls shared/*.ckpt.safetensors >/dev/null 2>&1"
check "the directory is free again once its run has ended" "run --steps 1 --checkpoint-dir shared >/dev/null"

# Temporary files of writers that were killed are removed when the directory is taken; one whose
# writer still runs is left alone.
dead=$(sh -c 'echo $$')
mkdir -p leftovers
printf 'half a checkpoint' > "leftovers/step-000000007.ckpt.safetensors.tmp.$dead"
printf 'still being written' > "leftovers/step-000000008.ckpt.safetensors.tmp.$$"
printf 'not ours' > "leftovers/notes.txt.tmp.$dead"
out=$(run --steps 2 --checkpoint-dir leftovers 2>&1)
check "a killed writer's temporary checkpoint is removed and said" \
  "[ ! -e leftovers/step-000000007.ckpt.safetensors.tmp.$dead ] && grep -q 'removed 1 temporary file' <<<\"\$out\""
check "a live writer's temporary file and other files are kept" \
  "[ -e leftovers/step-000000008.ckpt.safetensors.tmp.$$ ] && [ -e leftovers/notes.txt.tmp.$dead ]"

# A full disk while checkpointing (a file-size limit; SIGXFSZ ignored, so writes fail with EFBIG):
# a clear error, exit 1, the previous checkpoint intact, no temporary file left.
run --steps 2 --checkpoint-dir full >/dev/null
cp full/step-000000002.ckpt.safetensors before.ckpt
kib=$(( $(stat -c %s before.ckpt) / 2048 ))
err=$( (trap '' XFSZ; ulimit -f "$kib"; run --steps 4 --resume full) 2>&1 >/dev/null); status=$?
check "a checkpoint on a full disk fails with a clear error (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q 'cannot write full/step-000000004.ckpt.safetensors: File too large' <<<\"\$err\""
check "the previous checkpoint is intact, nothing half-written left" \
  "cmp -s before.ckpt full/step-000000002.ckpt.safetensors && [ -z \"\$(ls full | grep -v '^step-000000002.ckpt.safetensors$')\" ]"
err=$(run --steps 3 --log /dev/full --checkpoint-dir logfull 2>&1 >/dev/null); status=$?
check "a log on a full disk ends the run with a clear error (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q 'cannot write log /dev/full: No space left on device' <<<\"\$err\""
# Issue 30 #9: ... and the healthy checkpoint folder still takes the step that was trained.
check "the step trained before the log failed is checkpointed, and the error says where" \
  "grep -q 'the weights after step 1 are checkpointed in logfull: fix the fault, then resume with --resume logfull' <<<\"\$err\" &&
   [ -e logfull/step-000000001.ckpt.safetensors ]"
err=$(run --steps 3 --log /dev/full 2>&1 >/dev/null); status=$?
rescued=$(sed -n 's/.*written to the checkpoint folder \(\.\/mtrun-rescue-[0-9]*\).*/\1/p' <<<"$err")
check "with no checkpoint folder, a rescue checkpoint is written in the current folder and named (status $status: $err)" \
  "[ $status -eq 1 ] && [ -n '$rescued' ] && [ -e '$rescued/step-000000001.ckpt.safetensors' ] &&
   run --steps 2 --resume '$rescued' >/dev/null"
rm -rf ./mtrun-rescue-*

# Output paths that cannot be written are refused before the first step, not after the run.
for flags in "--export no/such/dir/w.safetensors" "--export adir" "--trace /proc/t.json" \
             "--dump-grads no/such/g.safetensors" "--checkpoint-dir /proc/ckpt" "--log no/such/l.jsonl"; do
  mkdir -p adir
  # shellcheck disable=SC2086
  out=$(run --steps 3 $flags 2>&1); status=$?
  check "$flags is refused before any step (status $status: $out)" \
    "[ $status -eq 1 ] && ! grep -q '^step' <<<\"\$out\" && grep -q -- '${flags%% *}\\|cannot' <<<\"\$out\""
done

# The token file truncated, or rewritten with ids past the vocabulary, while the run reads it:
# the steps trained before it are checkpointed (issue 30 #9), as the message promises.
for change in truncate rewrite; do
  cp corpus.tok changing.tok
  rm -rf changing.jsonl changing.ckpt
  "$bin/mtrun" m.plan --data changing.tok --steps 100000 --print-every 100000 --log changing.jsonl \
    --checkpoint-dir changing.ckpt >/dev/null 2>changing.err &
  pid=$!
  wait_for_lines changing.jsonl 2
  if [ $change = truncate ]; then
    truncate -s 100 changing.tok
  else
    /usr/bin/python3 -c "
import sys
data = bytearray(open('changing.tok', 'rb').read())
data[32:] = b'\xff\x7f' * ((len(data) - 32) // 2)
with open('changing.tok', 'r+b') as f: f.write(data)"
  fi
  wait $pid; status=$?
  check "a token file ${change}d under the run ends it with a clear error (status $status: $(cat changing.err))" \
    "[ $status -eq 1 ] && grep -q 'token file changing.tok changed while it was being read' changing.err &&
     grep -q 'checkpointed in changing.ckpt' changing.err && ls changing.ckpt/step-*.ckpt.safetensors >/dev/null"
done

# SIGINT: with --export the weights so far are written (exit 0); with nothing to keep them, the
# exit code says the progress is lost.
for keep in export none; do
  rm -f stop.jsonl stop.safetensors
  extra=(); [ $keep = export ] && extra=(--export stop.safetensors)
  "$bin/mtrun" "${long[@]}" --log stop.jsonl "${extra[@]}" > stop.out 2>&1 &
  pid=$!
  wait_for_lines stop.jsonl 2
  kill -INT $pid; wait $pid; status=$?
  if [ $keep = export ]; then
    check "SIGINT with --export writes the weights and exits 0 (status $status)" \
      "[ $status -eq 0 ] && grep -q 'weights written to stop.safetensors' stop.out && run --steps 1 --weights stop.safetensors >/dev/null"
  else
    check "SIGINT with nothing to keep the progress exits 130 and says so (status $status)" \
      "[ $status -eq 130 ] && grep -q 'progress is lost' stop.out"
  fi
done

# --verify-transfers: every copy to the device checked against the host's bytes. A clean run
# trains exactly as without; a transfer corrupted on its way (MT_TEST_CORRUPT_TRANSFER=N flips a
# bit of the N-th checked copy's device bytes) stops the run naming the tensor, its step's
# update not applied: the checkpoint it leaves is the clean run's of the step before, bit for bit.
# On arrival, parameters were already updated from the bad step: no checkpoint, and it says so.
run --steps 4 --log plain.jsonl --checkpoint-dir plain.ckpt --checkpoint-every 1 --keep 10 >/dev/null
run --steps 4 --log verified.jsonl --verify-transfers > verified.out
check "a verified run trains as an unverified one (losses bit for bit) and counts its checks" \
  "cmp -s <(sed 's/.*\"grad_norm\":\\([^,]*\\),\"loss\":\\([^,]*\\),.*/\\1 \\2/' plain.jsonl) \
          <(sed 's/.*\"grad_norm\":\\([^,]*\\),\"loss\":\\([^,]*\\),.*/\\1 \\2/' verified.jsonl) &&
   grep -q 'transfers verified: [1-9][0-9]* copies to the device' verified.out"
per_step=$(( $(sed -n 's/transfers verified: \([0-9]*\) copies.*/\1/p' verified.out) / 4 ))
err=$(MT_TEST_CORRUPT_TRANSFER=$((2 * per_step + 3)) run --steps 4 --verify-transfers --checkpoint-dir bad.ckpt \
  2>&1 >/dev/null); status=$?
check "a corrupted transfer in step 3 stops the run (status $status) naming the tensor and the checksums" \
  "[ $status -eq 1 ] && grep -q \"step 3: --verify-transfers: the bytes of '.*' (copy 3 of the step to the device: checksum [0-9a-f]* on the device, [0-9a-f]* on the host) differ from the host's.*its update was not applied, the weights before it are checkpointed\" <<<\"\$err\""
check "its checkpoint is the clean run's of step 2, bit for bit" \
  "same_tensors bad.ckpt/step-000000002.ckpt.safetensors plain.ckpt/step-000000002.ckpt.safetensors && [ ! -e bad.ckpt/step-000000003.ckpt.safetensors ]"
"$bin/mtc" gpt2-tiny --batch 4 --seq 32 --schedule streamed --update on-arrival -o arrival.plan --no-weights >/dev/null
err=$(MT_TEST_CORRUPT_TRANSFER=3 "$bin/mtrun" arrival.plan --data corpus.tok --steps 4 --print-every 1000 \
  --verify-transfers --checkpoint-dir arrival.ckpt 2>&1 >/dev/null); status=$?
check "on arrival, a corrupted transfer stops the run (status $status) with no checkpoint of updated weights" \
  "[ $status -eq 1 ] && grep -q 'parameters were updated as their gradients landed.*so no checkpoint was written' <<<\"\$err\" && ! ls arrival.ckpt/*.safetensors >/dev/null 2>&1"


# Issue 30 #8: a second run exporting to the same file (or folder) is refused while the first
# runs, naming it; its lock goes with it.
"$bin/mtrun" "${long[@]}" --log exporting.jsonl --export shared.safetensors --export-hf shared.hf >/dev/null &
first=$!
wait_for_lines exporting.jsonl 2
err=$(run --steps 1 --export shared.safetensors 2>&1 >/dev/null); status=$?
check "a second --export to a file being written is refused, naming the first run (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q -- '--export shared.safetensors is being written by another run (mtrun (pid $first on' <<<\"\$err\""
err=$(run --steps 1 --export-hf shared.hf/ 2>&1 >/dev/null); status=$?
check "so is a second --export-hf to the same folder (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q -- 'is being written by another run' <<<\"\$err\""
kill -TERM $first; wait $first
check "the first run exported, and its locks are gone" \
  "[ -e shared.safetensors ] && [ -e shared.hf/config.json ] && [ ! -e shared.safetensors.lock ] && [ ! -e shared.hf.lock ]"

# Issue 30 #5: a symlink planted at the lock's name (or, before, the temporary file's) redirects
# no write: the run is refused and the file it points to is untouched.
printf 'precious' > victim.txt
ln -sf victim.txt planted.safetensors.lock
err=$(run --steps 1 --export planted.safetensors 2>&1 >/dev/null); status=$?
check "a planted symlink at an export's lock is refused, its target untouched (status $status: $err)" \
  "[ $status -eq 1 ] && [ \"\$(cat victim.txt)\" = precious ] && [ ! -e planted.safetensors ]"

# Issue 30 #7, #10: --export-hf replaces a folder as a whole. A folder holding a model it did not
# write (a download, sharded) is refused before any step; its own earlier export is replaced
# whole, no old shard or index left beside the new weights; a killed export's staging folder goes.
mkdir -p foreign.hf && printf '{}' > foreign.hf/config.json && printf '{}' > foreign.hf/model.safetensors.index.json
out=$(run --steps 2 --export-hf foreign.hf 2>&1); status=$?
check "--export-hf into a folder holding a foreign model is refused before any step (status $status: $out)" \
  "[ $status -eq 1 ] && ! grep -q '^step' <<<\"\$out\" && grep -q 'holds files that no earlier --export-hf wrote' <<<\"\$out\""
run --steps 1 --export-hf mine.hf >/dev/null
printf '{"weight_map": {}}' > mine.hf/model.safetensors.index.json
printf 'an old shard' > mine.hf/model-00001-of-00002.safetensors
mkdir -p "mine.hf.tmp.$dead.0123456789abcdef" && printf 'half' > "mine.hf.tmp.$dead.0123456789abcdef/model.safetensors"
out=$(run --steps 2 --export-hf mine.hf 2>&1); status=$?
check "an earlier export is replaced whole and a killed export's staging folder removed (status $status: $out)" \
  "[ $status -eq 0 ] && [ \"\$(ls mine.hf | tr '\n' ' ')\" = 'config.json model.safetensors ' ] &&
   [ ! -e mine.hf.tmp.$dead.0123456789abcdef ] && grep -q 'removed 1 unfinished --export-hf folder' <<<\"\$out\""
check "the folder reimports as the new export" "'$bin/mtc' mine.hf -o mine.plan >/dev/null"

# Issue 30 #6: refused for host memory under a memory limit, mtrun exits at once (it hung at exit:
# OpenBLAS's exit handler joined a worker stuck in malloc).
"$bin/mtc" gpt2-124m --batch 4 --seq 256 --no-weights -o big.plan >/dev/null
err=$( (ulimit -v 800000; timeout 60 "$bin/mtrun" big.plan --data corpus.tok --steps 1) 2>&1 >/dev/null); status=$?
check "a run refused for host memory under ulimit -v exits 1 at once (status $status: $err)" \
  "[ $status -eq 1 ] && grep -q 'of host memory' <<<\"\$err\""

finish
