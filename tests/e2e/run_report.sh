#!/usr/bin/env bash
# mtrun --report (issue 32): a run's picture as one self-contained HTML page — its embedded data is
# the --log file's lines, it draws the loss through every step and each validation, fetches and
# runs nothing, and a real browser (Debian's chromium, headless) renders it to a screenshot that
# is not blank. Rank 0 alone writes it; a report path that cannot be written is refused before the
# first step.
# usage: run_report.sh BIN_DIR WORK_DIR
set -uo pipefail
bin=$1
here=$(dirname "$(readlink -f "$0")")
mkdir -p "$2" && cd "$2" || exit 1
source "$here/check.sh"
report=$here/run_report.py
make_corpus
"$bin/mtc" gpt2-tiny --batch 2 --seq 16 -o tiny.plan >/dev/null
"$bin/mtrun" tiny.plan --data corpus.tok --steps 12 --val-fraction 0.2 --val-every 4 --log run.jsonl \
  --report run.html --print-every 100 > run.out
check "the report is written and said" "[ -s run.html ] && grep -q 'report written to run.html' run.out"
check "its data is the log's, its charts drawn from it, nothing fetched" "$report page run.html run.jsonl 12"
check "it names what ran and how fast" \
  "grep -q 'gpt2-tiny' run.html && grep -q 'measured step' run.html && grep -q 'predicted step' run.html"
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "FAIL: no chromium (bash tools/setup.sh installs it)"
  failed=$((failed + 1))
else
  HOME=$PWD timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=720,1400 \
    --screenshot="$PWD/shot.png" "file://$PWD/run.html" >browser.out 2>&1
  check "chromium renders it: a screenshot in the charts' colours, not blank" "$report png shot.png"
fi
touch not-a-folder
"$bin/mtrun" tiny.plan --data corpus.tok --steps 2 --report not-a-folder/r.html > refused.out 2> refused.err
check "a report path that cannot be written is refused before the first step" \
  "[ \$? -ne 0 ] && grep -q -- '--report' refused.err && ! grep -q '^step ' refused.out"
finish
