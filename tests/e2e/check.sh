# Sourced by the end-to-end scripts: `check NAME CONDITION` evaluates CONDITION and counts it;
# `finish` prints the closing tally and fails the script if any check failed; `make_corpus`
# writes corpus.tok (byte tokens of a generated text); `train PLAN NAME WEIGHTS [flags]` runs
# PLAN 10 steps from WEIGHTS on it with $bin/mtrun: NAME.jsonl, NAME.safetensors, NAME.loss.
passed=0 failed=0
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
