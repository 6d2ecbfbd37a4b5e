#!/usr/bin/env bash
# The host-memory check in a real memory cgroup (issue 18, item 8): a plan that needs more than
# the cgroup allows is refused with the cgroup named — exit 1, not the OOM killer's 137 — and a
# small plan trains in the same cgroup. Skips (77) where this process may not make a memory
# cgroup (not root, no writable cgroup v1 memory hierarchy or v2 with the memory controller).
# usage: cgroup_limit.sh BIN_DIR WORK_DIR
set -uo pipefail
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
limit=$((256 * 1024 * 1024))
cg="" limit_file=""
if [ -w /sys/fs/cgroup/memory ] && mkdir "/sys/fs/cgroup/memory/mt_test_$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/memory/mt_test_$$ limit_file=memory.limit_in_bytes
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && mkdir "/sys/fs/cgroup/mt_test_$$" 2>/dev/null; then
  cg=/sys/fs/cgroup/mt_test_$$ limit_file=memory.max
fi
[ -n "$cg" ] || { echo "SKIP: cannot make a memory cgroup here (needs root and a writable cgroup hierarchy)"; exit 77; }
trap 'rmdir "$cg" 2>/dev/null' EXIT
echo "$limit" > "$cg/$limit_file" || { echo "SKIP: cannot set $cg/$limit_file"; exit 77; }
# in_cgroup COMMAND...: runs the command as a member of the cgroup (a subshell moved there, then exec).
in_cgroup() { (echo "$BASHPID" > "$cg/cgroup.procs" && exec "$@"); }
in_cgroup true || { echo "SKIP: cannot move a process into $cg"; exit 77; }

failed=0
"$bin/mttok" --bytes /usr/share/games/fortunes/fortunes -o data.tok > /dev/null
# 31.9 M parameters: 0.63 GiB of host memory with the CPU backend's arena, over the 256 MiB.
"$bin/mtc" llama-bench --width 768 --layers 8 --batch 2 --seq 64 --no-weights -o big.plan > /dev/null
in_cgroup "$bin/mtrun" big.plan --data data.tok --steps 2 > big.out 2>&1
code=$?
cat big.out
if [ $code -ne 1 ] || ! grep -q "memory cgroup .* limits it to 256.0 MiB" big.out; then
  echo "FAIL: a plan over the cgroup's limit: exit $code (want 1 and the cgroup named)"
  failed=$((failed + 1))
fi
"$bin/mtc" gpt2-tiny --batch 2 --seq 32 -o small.plan > /dev/null
in_cgroup "$bin/mtrun" small.plan --data data.tok --steps 3 --print-every 1 > small.out 2>&1 ||
  { echo "FAIL: a small plan did not train inside the cgroup:"; cat small.out; failed=$((failed + 1)); }
[ "$failed" -eq 0 ] && echo "cgroup_limit: passed" || { echo "cgroup_limit: $failed failed"; exit 1; }
