# Sourced by the end-to-end scripts: `check NAME CONDITION` evaluates CONDITION and counts it;
# `finish` prints the closing tally and fails the script if any check failed.
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1"; fi; }
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
