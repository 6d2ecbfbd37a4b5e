# Sourced by the end-to-end scripts: `check NAME CONDITION` evaluates CONDITION and counts it;
# `finish` prints the closing tally and fails the script if any check failed; `make_corpus`
# writes corpus.tok (byte tokens of a generated text); `train PLAN NAME WEIGHTS [flags]` runs
# PLAN 10 steps from WEIGHTS on it with $bin/mtrun: NAME.jsonl, NAME.safetensors, NAME.loss;
# `check_resume PLAN WEIGHTS` checks that PLAN resumed from a checkpoint at step 5 ends 10 steps
# with the weights of an uninterrupted run, bit for bit.
passed=0 failed=0
e2e_dir=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
# same_tensors A B: the safetensors files A and B hold the same tensors byte for byte (their
# metadata may differ: exports of runs of different plans record different provenance).
same_tensors() { /usr/bin/python3 "$e2e_dir/same_tensors.py" "$1" "$2"; }
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1"; fi; }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
make_corpus() {
  for i in $(seq 1 600); do echo "$i: how vexingly quick daft zebras jump $((i % 17))"; done > corpus.txt
  "$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
}
train() {
  local plan=$1 name=$2 weights=$3
  shift 3
  "$bin/mtrun" "$plan" --data corpus.tok --weights "$weights" --steps 10 --log "$name.jsonl" \
    --export "$name.safetensors" --print-every 100 "$@" >/dev/null
  sed 's/.*"loss":\([^,]*\),.*/\1/' "$name.jsonl" > "$name.loss"
}
check_resume() {
  local plan=$1 weights=$2
  # A constant learning rate: a 5-step run's cosine would differ from a 10-step run's.
  train "$plan" resume.straight "$weights" --min-lr-ratio 1
  rm -rf resume.ckpt
  "$bin/mtrun" "$plan" --data corpus.tok --weights "$weights" --steps 5 --min-lr-ratio 1 --checkpoint-dir resume.ckpt \
    --checkpoint-every 5 --print-every 100 >/dev/null
  "$bin/mtrun" "$plan" --data corpus.tok --weights "$weights" --steps 10 --min-lr-ratio 1 --resume resume.ckpt \
    --export resume.resumed.safetensors --print-every 100 >/dev/null
  check "resumed from step 5: bit-identical weights after 10 steps" \
    "cmp -s resume.straight.safetensors resume.resumed.safetensors"
}
