#!/usr/bin/env bash
# Checkpoints: a run stopped by SIGTERM (checkpoint on the way out) or killed by SIGKILL (the
# newest complete checkpoint survives; a half-written file is ignored) and then resumed gives
# bit-identical losses and weights to an uninterrupted run; a checkpoint of another plan, a
# corrupt one and an empty directory are refused with a message.
# usage: resume.sh BIN_DIR WORK_DIR
set -uo pipefail
source "$(dirname "$(readlink -f "$0")")/check.sh"
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 2
# "step loss" per line, sorted as join wants.
losses() { sed 's/.*"loss":\([^,]*\),.*"step":\([0-9]*\).*/\2 \1/' "$1" | sort -k1,1 | uniq; }
wait_for_lines() { for _ in $(seq 1 600); do [ -f "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ] && return; sleep 0.05; done; }

for i in $(seq 1 500); do echo "$i: sphinx of black quartz, judge my vow $((i % 13))"; done > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtc" gpt2-tiny --batch 8 --seq 64 -o m.plan >/dev/null
"$bin/mtc" llama-tiny --batch 8 --seq 64 -o other.plan >/dev/null
steps=120  # long enough that the signals below land mid-run
args=(m.plan --data corpus.tok --weights m.safetensors --steps $steps --print-every 1000)
run() { "$bin/mtrun" "${args[@]}" "$@"; }

run --log a.jsonl --export a.safetensors >/dev/null

# SIGTERM: the current step finishes, a checkpoint is written, the run exits cleanly.
"$bin/mtrun" "${args[@]}" --log b.jsonl --checkpoint-dir ckpt_b --checkpoint-every 7 > b1.txt &
pid=$!
wait_for_lines b.jsonl 10
kill -TERM $pid
wait $pid
status=$?
check "SIGTERM exits cleanly (status $status)" "[ $status -eq 0 ]"
check "SIGTERM writes a checkpoint" "grep -q 'stopped by SIGTERM' b1.txt && ls ckpt_b/*.ckpt.safetensors >/dev/null 2>&1"
run --log b.jsonl --resume ckpt_b --export b.safetensors > b2.txt
check "resumed after SIGTERM: same losses" "[ \"\$(losses a.jsonl)\" = \"\$(losses b.jsonl)\" ]"
check "resumed after SIGTERM: same weights" "cmp -s a.safetensors b.safetensors"

# SIGKILL: no warning at all; a stale temporary file from a write in progress is ignored.
"$bin/mtrun" "${args[@]}" --log c.jsonl --checkpoint-dir ckpt_c --checkpoint-every 3 >/dev/null &
pid=$!
wait_for_lines c.jsonl 14
kill -KILL $pid
wait $pid 2>/dev/null
printf 'half a checkpoint' > ckpt_c/step-000000099.ckpt.safetensors.tmp.4242
run --log c2.jsonl --resume ckpt_c --export c.safetensors > c2.txt
check "resumed after SIGKILL from a complete checkpoint" "grep -q 'resuming from ckpt_c/step-0000000' c2.txt"
check "resumed after SIGKILL: same weights" "cmp -s a.safetensors c.safetensors"
check "resumed after SIGKILL: same losses for the steps it ran" \
  "[ -z \"\$(join <(losses a.jsonl) <(losses c2.jsonl) | awk '\$2 != \$3')\" ] && [ \$(wc -l < c2.jsonl) -gt 0 ]"
check "keeps only the newest 3 checkpoints" "[ \$(ls ckpt_c/*.ckpt.safetensors | wc -l) -le 3 ]"

# Refusals.
err=$("$bin/mtrun" other.plan --data corpus.tok --steps 5 --resume ckpt_b 2>&1 >/dev/null); status=$?
check "another plan's checkpoint is refused" "[ $status -ne 0 ] && grep -q 'written for another plan' <<<\"\$err\""
mkdir -p broken && cp "$(ls ckpt_b/*.ckpt.safetensors | tail -1)" broken/step-000000005.ckpt.safetensors
truncate -s -100 broken/step-000000005.ckpt.safetensors
err=$(run --resume broken 2>&1 >/dev/null); status=$?
check "a truncated checkpoint is refused" "[ $status -ne 0 ] && grep -q 'not valid safetensors' <<<\"\$err\""
# Issue 18: a flipped bit in a checkpoint is reported by its tensor's checksum, not trained on.
mkdir -p flipped && cp "$(ls ckpt_b/*.ckpt.safetensors | tail -1)" flipped/step-000000005.ckpt.safetensors
/usr/bin/python3 -c "
path = 'flipped/step-000000005.ckpt.safetensors'
data = bytearray(open(path, 'rb').read()); data[-1000] ^= 0x10; open(path, 'wb').write(data)"
err=$(run --resume flipped 2>&1 >/dev/null); status=$?
check "a checkpoint with a flipped bit is refused, naming the tensor" \
  "[ $status -ne 0 ] && grep -q \"tensor '.*' does not match its checksum\" <<<\"\$err\""
# Provenance: each checkpoint and export names the code, plan, data (with its checksum) and the
# initial weights; a resumed run carries the original's.
shown=$("$bin/mtdump" "$(ls ckpt_c/*.ckpt.safetensors | tail -1)")
check "a checkpoint records its provenance (mtdump shows it, checksums verified)" \
  "grep -q 'provenance.data  *corpus.tok: [0-9]* tokens, crc32c [0-9a-f]\{8\}' <<<\"\$shown\" &&
   grep -q 'provenance.initial_weights  *m.safetensors (crc32c [0-9a-f]\{8\}' <<<\"\$shown\" &&
   grep -q 'provenance.code  *MegaTrain ' <<<\"\$shown\" && grep -q 'all [0-9]* match' <<<\"\$shown\""
check "the export of a resumed run records the same provenance as the uninterrupted run's" \
  "[ \"\$(\"$bin/mtdump\" a.safetensors | grep provenance)\" = \"\$(\"$bin/mtdump\" c.safetensors | grep provenance)\" ]"
mkdir -p empty
err=$(run --resume empty 2>&1 >/dev/null); status=$?
check "an empty directory is refused" "[ $status -ne 0 ] && grep -q 'no checkpoint in empty' <<<\"\$err\""
# --resume auto (issue 29): a preemptible job restarts with one command. With no checkpoint yet
# (a folder holding only the lock of a run killed before its first) it starts from the beginning
# and says so; once there is one it resumes, as --resume DIR does, bit for bit.
mkdir -p auto && : > auto/.mtrun.lock
out=$("$bin/mtrun" m.plan --data corpus.tok --weights m.safetensors --steps 8 --print-every 1000 \
  --checkpoint-dir auto --checkpoint-every 4 --resume auto --log auto.jsonl 2>&1); status=$?
check "--resume auto with no checkpoint yet starts from the beginning, saying so (status $status)" \
  "[ $status -eq 0 ] && grep -q 'no checkpoint in auto yet: starting from the beginning' <<<\"\$out\""
rm auto/step-000000008.ckpt.safetensors
out=$("$bin/mtrun" m.plan --data corpus.tok --weights m.safetensors --steps 8 --print-every 1000 \
  --checkpoint-dir auto --checkpoint-every 4 --resume auto --log auto.jsonl 2>&1); status=$?
check "--resume auto resumes from the newest checkpoint once there is one (status $status)" \
  "[ $status -eq 0 ] && grep -q 'resuming from auto/step-000000004' <<<\"\$out\" &&
   [ \"\$(tail -1 auto.jsonl | losses /dev/stdin)\" = \"\$(\"$bin/mtrun\" m.plan --data corpus.tok --weights m.safetensors \
      --steps 8 --print-every 1000 --log straight8.jsonl >/dev/null; tail -1 straight8.jsonl | losses /dev/stdin)\" ]"
err=$(run --resume auto 2>&1 >/dev/null); status=$?
check "--resume auto without --checkpoint-dir is a bad flag (status $status)" \
  "[ $status -eq 2 ] && grep -q 'resume auto needs --checkpoint-dir' <<<\"\$err\""

finish
