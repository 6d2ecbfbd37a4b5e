#!/usr/bin/env bash
# mtdump --trace writes the predicted timeline as Chrome/Perfetto JSON: one track per stream,
# slices that never overlap within a stream, a copy-in before the first kernel that reads it,
# the host's AdamW (the previous step's, deferred) still running when compute starts,
# and device memory in use that never exceeds the arena and returns to zero.
# usage: trace.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
"$bin/mtc" llama-tiny --batch 2 --seq 16 --schedule streamed-recompute --no-weights -o m.plan >/dev/null
"$bin/mtdump" m.plan --trace trace.json >/dev/null
"$bin/mtdump" m.plan --memory | sed -n 's/.*arena \([0-9.]*\) MiB.*/\1/p' | head -1 |
  awk '{ printf "%d", $1 * 1048576 }' > arena.txt
/usr/bin/python3 - <<'PY'
import json, collections
events = json.load(open("trace.json"))["traceEvents"]
names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
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
print("1 passed, 0 failed")
PY
