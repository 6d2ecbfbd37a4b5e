#!/usr/bin/env bash
# Speed that stays: the CPU kernels whose time is their exp/tanh (GELU, SiLU, SwiGLU and their
# gradients, attention's softmax) must be vectorised. A change that makes GCC give up on their
# loops — issue 29: a NaN guard in fastExp put GELU at libm speed, 25 % of a step, unseen — fails
# here. Not a timing: the object code itself is read. Each function named must hold a packed
# float-to-int conversion (cvttps2dq: fastExp's range reduction, one per vectorised exp), in its
# own code or in the OpenMP-outlined parts of its loops.
# usage: vector_code.sh OBJECT_FILE... -- FUNCTION...
set -uo pipefail
objects=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do objects+=("$1"); shift; done
shift
[ ${#objects[@]} -gt 0 ] && [ $# -gt 0 ] || { echo "usage: vector_code.sh OBJECT_FILE... -- FUNCTION..."; exit 2; }
# One line per function: "<name> <packed conversions> <scalar conversions>"; an OpenMP part
# (mt::gelu_cpu(...) [clone ._omp_fn.0]) counts for the function it was outlined from; a function
# of an anonymous namespace is named as if it were its enclosing namespace's (mt::attentionForward).
table=$(objdump -d -C --no-show-raw-insn "${objects[@]}" | awk '
  /^[0-9a-f]+ <.*>:$/ { name = $0; sub(/^[0-9a-f]+ </, "", name); gsub(/\(anonymous namespace\)::/, "", name)
                        sub(/\(.*/, "", name); sub(/>:$/, "", name); next }
  name != "" && /cvttps2dq/ { packed[name]++ }
  name != "" && /cvttss2si/ { scalar[name]++ }
  END { for (n in packed) print n, packed[n], scalar[n] + 0; for (n in scalar) if (!(n in packed)) print n, 0, scalar[n] }')
failed=0
for function in "$@"; do
  packed=$(awk -v f="$function" '$1 == f { sum += $2 } END { print sum + 0 }' <<<"$table")
  scalar=$(awk -v f="$function" '$1 == f { sum += $3 } END { print sum + 0 }' <<<"$table")
  if [ "$packed" -gt 0 ]; then
    echo "ok: $function is vectorised ($packed packed conversions, $scalar scalar for loop tails)"
  else
    echo "FAIL: $function has no vectorised exp ($scalar scalar conversions): a change stopped GCC vectorising it"
    echo "      (gcc -fopt-info-vec-missed on its file says why)"
    failed=$((failed + 1))
  fi
done
[ $failed -eq 0 ]
