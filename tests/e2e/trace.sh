#!/usr/bin/env bash
# mtdump --trace writes the predicted timeline as Chrome/Perfetto JSON: one track per stream,
# slices that never overlap within a stream, a copy-in before the first kernel that reads it,
# the host's AdamW (the previous step's, deferred) still running when compute starts,
# and device memory in use that never exceeds the arena and returns to zero. Then mtrun --trace
# measures a step on the CPU backend and mtdump --measured lays it beside the prediction: the
# same instructions, in the plan's order, never overlapping on a stream, no kernel before the
# weights it reads arrived; mtrun's report says how the measured step compares.
# usage: trace.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$bin/mtc" llama-tiny --batch 2 --seq 16 --schedule streamed-recompute --no-weights -o m.plan >/dev/null
"$bin/mtdump" m.plan --trace trace.json >/dev/null
printf 'hello world, this is a small corpus for the tests.\n%.0s' {1..100} > corpus.txt
"$bin/mttok" --bytes corpus.txt -o corpus.tok >/dev/null
"$bin/mtrun" m.plan --data corpus.tok --steps 3 --trace measured.json --profile > run.txt
"$bin/mtdump" m.plan --trace both.json --measured measured.json >/dev/null
grep -q "measured over 2 steps (after the first): .* model TFLOP/s; predicted .* on cpu" run.txt ||
  { echo "FAIL: mtrun's report lacks the measured-vs-predicted line"; cat run.txt; exit 1; }
grep -q "compute busy .*; h2d .* GB/s" run.txt || { echo "FAIL: no busy/copy rates in the report"; exit 1; }
grep -q "mt.matmul .* ms/step" run.txt || { echo "FAIL: --profile printed no kernel times"; exit 1; }
"$bin/mtdump" m.plan --memory | sed -n 's/.*arena \([0-9]*\) bytes.*/\1/p' | head -1 > arena.txt
/usr/bin/python3 - <<'PY'
import json, collections
events = json.load(open("trace.json"))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
slices = collections.defaultdict(list)
for e in events:
    if e["ph"] == "X":
        slices[names[e["tid"]]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
assert set(slices) == {"compute", "h2d", "d2h", "host"}, slices.keys()
for stream, items in slices.items():
    items.sort()
    for (s0, e0, _), (s1, e1, _) in zip(items, items[1:]):
        assert s1 >= e0 - 1e-9, f"{stream}: overlapping slices"
first_kernel = min(s for s, e, n in slices["compute"])
first_copy_end = min(e for s, e, n in slices["h2d"])
assert first_copy_end <= first_kernel + 1e-9, "a kernel starts before any weight arrived"
updates = [(s, e) for s, e, n in slices["host"] if n == "ADAMW_PREVIOUS"]
assert updates, "no deferred AdamW on the host stream"
assert first_kernel < max(e for s, e in updates), "the optimizer does not overlap the forward"
memory = [e["args"]["in use"] for e in events if e["ph"] == "C"]
arena_mib = int(open("arena.txt").read()) / 1048576.0
assert memory and max(memory) <= arena_mib + 1e-9 and abs(memory[-1]) < 1e-9, (max(memory), arena_mib)
print(f"device memory peaks at {max(memory):.2f} of {arena_mib:.2f} MiB")
print(f"{sum(map(len, slices.values()))} slices on {len(slices)} streams")

# The measured step beside the predicted one: process 1, the same slices per stream.
both = json.load(open("both.json"))["traceEvents"]
processes = {e["pid"]: e["args"]["name"] for e in both if e.get("name") == "process_name"}
assert processes == {0: "predicted (cpu)", 1: "measured (cpu)"}, processes
measured = collections.defaultdict(list)
for e in both:
    if e["ph"] == "X" and e["pid"] == 1:
        measured[names[e["tid"]]].append((e["ts"], e["ts"] + e["dur"], e["name"]))
for stream in slices:
    assert sorted(n for _, _, n in measured[stream]) == sorted(n for _, _, n in slices[stream]), stream
    items = sorted(measured[stream])
    assert all(e >= s for s, e, _ in items), f"{stream}: a slice ends before it starts"
    for (s0, e0, _), (s1, e1, _) in zip(items, items[1:]):
        assert s1 >= e0 - 1e-3, f"{stream}: measured slices overlap"
first_kernel = min(s for s, e, n in measured["compute"])
assert min(e for s, e, n in measured["h2d"]) <= first_kernel + 1e-3, "measured: a kernel ran before any weight arrived"
print(f"measured step: {sum(map(len, measured.values()))} slices, beside the prediction")
print("2 passed, 0 failed")
PY
