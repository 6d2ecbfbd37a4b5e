#!/usr/bin/env bash
# Runs on the lent GPU machine (device tool), after bench/gpu/pack.sh here:
#   run(command="tar xJf .gpu.tar.xz && bash bench/gpu/run.sh", carry=[".gpu.tar.xz"], timeout_s=600)
# 1. every CUDA kernel against its CPU twin; 2. the same plans on cuda and cpu, 10 steps:
# losses and weights compared; decode plans' logits against window plans' on cuda; --export-hf
# folders loaded by transformers; 3. the Llama bench plans on cuda (exact fp32, then TF32):
# step time, model TFLOP/s, copy rates, busy share, measured vs predicted; 4. PyTorch native
# training of the same architectures where they fit in GPU memory; before 3, the kernels alone
# (mt_gpu_kernel_rate: bf16 attention and the models' products) beside PyTorch's (BENCH_KERNELS=0 skips). Logs go to $OUT; a table
# is printed last. One call may run 10 minutes: `run.sh check` does 1-2, `run.sh bench` 3-4,
# `run.sh attention` the twins and the parity of the plans with 64- and 128-wide heads (what a
# change to the tensor-core attention needs), then 3-5,
# `run.sh` all of it (about 6-8 minutes expected; split it if the first call runs long);
# (2 also loads --export-peft folders in peft: bench/gpu/peft_check.py);
# `run.sh cudnn` the twins, cuDNN's attention alone beside ours and the bf16 parity plans with
# --attention cudnn (about 1 minute), then with BENCH_AFTER_CUDNN=1 the bench plans of
# BENCH_MODELS (BENCH_KERNELS=0 BENCH_PEERS=0 BENCH_GEN=0 keep it to them; BENCH_ATTENTION="cudnn
# ours" times a bf16 plan with each).
set -uo pipefail
what=${1:-all}
cd "$(dirname "$0")/../.."
[ -d .gpu ] || { echo "no .gpu/: run bash bench/gpu/pack.sh here and carry .gpu"; exit 2; }
# Logs in .gpu/out; what comes back from the device is $OUT/summary.txt and $OUT/logs.tgz
# (the tool returns at most 8 files).
out=.gpu/out
rm -rf "$out" && mkdir -p "$out"
# Our binaries get our libraries (built on Debian 12) and the machine's CUDA; Python must not see
# them (its torch needs the machine's newer libstdc++).
cublas=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
cudart=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcudart.so.13*' 2>/dev/null | head -1)
# cuDNN (mtrun --attention cudnn): the machine's, PyTorch's first (9.19 in November 2026; the CUDA
# folder's was 9.14), with the NVRTC its runtime-compiled engines load.
cudnn=$(find /opt /usr/local/cuda*/ /usr/lib -name 'libcudnn.so.9*' 2>/dev/null | head -1)
nvrtc=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libnvrtc.so.13*' 2>/dev/null | head -1)
mt_libs=$PWD/.gpu/lib:${cublas:+$(dirname "$cublas"):}${cudart:+$(dirname "$cudart"):}${cudnn:+$(dirname "$cudnn"):}${nvrtc:+$(dirname "$nvrtc"):}/usr/local/cuda/lib64
# mt SECONDS TOOL ARGS...: one of our tools under a time limit.
mt() { local secs=$1 tool=$2; shift 2; LD_LIBRARY_PATH=$mt_libs:${LD_LIBRARY_PATH:-} timeout "$secs" ".gpu/bin/$tool" "$@"; }
# Bench models and precisions: all by default; BENCH_MODELS="llama-1b" BENCH_MODES=tf32 narrow a call
# (also llama-1b-untied, llama-1b-split: the LM head whole and in vocabulary chunks; BENCH_PEERS=0;
# llama-1b-mixed, qwen7b-mixed: bf16 plans, run once each whatever BENCH_MODES says; llama-1b-mixed-rows,
# llama-1b-mixed-packed: bf16 on instruction-shaped examples, one per row and packed; BENCH_GEN=0 skips
# the generation timing).
bench_models=${BENCH_MODELS:-"llama-1b llama-3b llama-7b"}
bench_modes=${BENCH_MODES:-"fp32 tf32"}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
date -u +%Y-%m-%dT%H:%MZ | tee -a "$out/gpu.txt"
LD_LIBRARY_PATH=$mt_libs ldd .gpu/bin/mtrun | grep -E 'not found|cuda|cublas|cudnn' | tee "$out/ldd.txt"

twins="" parity="" kernel_rows="" rows="" torch_rows="" adamw_rows=""
# Each part's header with the seconds since the start (SECONDS): what the next call's limit needs.
section() { echo "== $* (t+${SECONDS}s)"; timings+="$* at t+${SECONDS}s; "; }
timings=""
# The summary so far, with the logs, copied to $OUT after each part: a call that runs out of
# time still returns what it measured.
publish() {
  {
    echo "GPU: $(head -1 "$out/gpu.txt"), $(tail -1 "$out/gpu.txt")"
    echo "twins: $twins"
    echo "parts began: $timings(t+${SECONDS}s now)"
    echo "$parity"
    echo "$kernel_rows"
    echo "$rows"
    echo "$adamw_rows"
    echo "$torch_rows"
  } > "$out/summary.txt"
  if [ -n "${OUT:-}" ]; then
    cp "$out/summary.txt" "$OUT/"
    # The weights and gradients of the parity runs stay on the machine (too large to come back).
    tar czf "$OUT/logs.tgz" -C .gpu --exclude="*.safetensors" out
  fi
}
if [ "$what" = all ] || [ "$what" = check ] || [ "$what" = attention ]; then
section "1. CUDA twins"
mt 180 mt_cuda_twin_tests > "$out/twins.txt" 2>&1 || echo "twin tests exited $?"
twins=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/twins.txt" | tr '\n' ' ')
echo "$twins"; grep -A3 'Failure' "$out/twins.txt" | head -40

section "2. cuda vs cpu, 10 steps"
parity=""
plans=$(ls .gpu/plans/gpt2-tiny*.plan .gpu/plans/llama-tiny*.plan .gpu/plans/qwen3-moe-tiny*.plan .gpu/plans/qwen2-moe-tiny*.plan .gpu/plans/mixtral-tiny*.plan .gpu/plans/glm4-moe-tiny*.plan .gpu/plans/deepseek-v3-tiny*.plan .gpu/plans/deepseek-v2-tiny*.plan \
  .gpu/plans/gpt-oss-tiny*.plan .gpu/plans/gemma3-tiny*.plan .gpu/plans/gemma2-tiny*.plan .gpu/plans/phi4mini-tiny*.plan .gpu/plans/packed-*.plan \
  .gpu/plans/dpo-*.plan .gpu/plans/kto-*.plan)
[ "$what" = attention ] && plans=$(ls .gpu/plans/llama-tiny-d*-mixed.plan .gpu/plans/packed-llama-tiny-d64-mixed.plan)
# CHECK_PLANS="ERE": only the plans whose names (no folder, no .plan: ^llama-tiny$) match (a call
# that rechecks what changed).
[ -n "${CHECK_PLANS:-}" ] && plans=$(for p in $plans; do basename "$p" .plan | grep -qE "$CHECK_PLANS" && echo "$p"; done)
for plan in $plans; do
  name=$(basename "$plan" .plan)
  data=(--data .gpu/corpus.tok)
  case $name in
    packed-*) data=(--data .gpu/examples.tok --rows packed-examples) ;;
    dpo-*) data=(--data .gpu/pairs.tok --lr 1e-3) ;;  # the next token's rate: weights that move (not DPO's 1e-6)
    kto-*) data=(--data .gpu/labelled.tok --lr 1e-3) ;;
  esac
  for backend in cpu cuda; do
    mt 60 mtrun "$plan" "${data[@]}" --steps 10 --backend $backend --log "$out/$name.$backend.jsonl" \
      --export "$out/$name.$backend.safetensors" --dump-grads "$out/$name.$backend.grads.safetensors" --print-every 100 > "$out/$name.$backend.txt" 2>&1 ||
      { echo "$name on $backend failed:"; tail -5 "$out/$name.$backend.txt"; }
  done
  tol=(); case $name in *-mixed*) tol=(--bf16) ;; esac  # bf16 plans: bf16 tolerances
  # A bf16 plan (not a preference plan, whose data sets its own --lr) 8 times more on the cpu, from
  # its starting weights (a step at lr 0) perturbed by 1e-3 (seeds 1-8, side by side): the cpu's own
  # spread, which a mixture's routing or AdamW's near-zero steps can carry past the fixed bounds. Such
  # events are discrete: on the cpu, gpt2-tiny-mixed's blocks.0.ln2.bias moved 7.5e-2 in 2 of 8
  # perturbations and under 1e-2 in the others (docs/perf.md, session 46), so one run is not enough.
  case $name in
    dpo-* | kto-*) ;;
    *-mixed*)
      spreads=()
      if mt 60 mtrun "$plan" "${data[@]}" --steps 1 --lr 0 --backend cpu --export "$out/$name.start.safetensors" \
        --print-every 100 > "$out/$name.start.txt" 2>&1; then
        for seed in 1 2 3 4 5 6 7 8; do
          run=$name.cpu-perturbed$seed
          { python3 bench/gpu/perturb_weights.py "$out/$name.start.safetensors" "$out/$run.weights.safetensors" 1e-3 $seed &&
            OMP_NUM_THREADS=2 mt 60 mtrun "$plan" "${data[@]}" --steps 10 --backend cpu --weights "$out/$run.weights.safetensors" \
              --log "$out/$run.jsonl" --export "$out/$run.safetensors" --dump-grads "$out/$run.grads.safetensors" \
              --print-every 100; } > "$out/$run.txt" 2>&1 &
        done
        wait
        for seed in 1 2 3 4 5 6 7 8; do
          if grep -q '^done' "$out/$name.cpu-perturbed$seed.txt"; then spreads+=("cpu-perturbed$seed")
          else echo "$name's perturbed cpu run $seed failed:"; tail -3 "$out/$name.cpu-perturbed$seed.txt"; fi
        done
      else
        echo "$name's start on the cpu failed:"; tail -3 "$out/$name.start.txt"
      fi
      [ ${#spreads[@]} -gt 0 ] && tol+=(--spread "$(IFS=,; echo "${spreads[*]}")")
      ;;
  esac
  # each plan's line as it comes (a call cut off at its limit still shows the plans done)
  line=$(python3 tests/e2e/backend_parity.py "$out/$name" 10 "${tol[@]}"); echo "$line"; parity+="$line"$'\n'
done
# Issue 31's first GPU check: 2 ranks sharing the one GPU (each its own arena) against one process
# with --accumulate 2 (the sums happen on the host in rank order). On the CPU that is bit for bit;
# on cuda the kernels' column sums add their chunks atomically, in an order that varies run to run,
# so two --accumulate 2 runs are compared too: the ranks must be within 10x their spread (1e-6 at
# least). Needs an mpirun that can start our OpenMPI 4.1 build (Debian's); skipped, saying so,
# where there is none.
section "2a. 2 ranks on one GPU vs --accumulate 2 (cuda)"
if command -v mpirun >/dev/null; then
  ranked=(.gpu/plans/llama-tiny.plan --data .gpu/corpus.tok --steps 6 --backend cuda --print-every 100)
  mt 60 mtrun "${ranked[@]}" --accumulate 2 --export "$out/ranks.acc.safetensors" > "$out/ranks.acc.txt" 2>&1
  mt 60 mtrun "${ranked[@]}" --accumulate 2 --export "$out/ranks.acc2.safetensors" > "$out/ranks.acc2.txt" 2>&1
  LD_LIBRARY_PATH=$mt_libs:${LD_LIBRARY_PATH:-} OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 120 mpirun -np 2 --bind-to none -x LD_LIBRARY_PATH .gpu/bin/mtrun "${ranked[@]}" \
    --export "$out/ranks.np.safetensors" > "$out/ranks.np.txt" 2>&1 || { echo "2 ranks failed:"; tail -8 "$out/ranks.np.txt"; }
  grep 'ranks on their host' "$out/ranks.np.txt"
  parity+=$(python3 -c "import sys; sys.path.insert(0, 'tests/e2e'); import mt_reference as ref
acc, acc2, ranks = (ref.read_safetensors(f) for f in sys.argv[1:])
err = lambda a, b: max(ref.rel_err(a[n], b[n]) for n in b)
spread, apart = err(acc2, acc), err(ranks, acc)
ok = apart <= max(10 * spread, 1e-6)
print(f'ranks: 2 ranks on one GPU within {apart:.2g} of --accumulate 2 (two --accumulate 2 runs: {spread:.2g}): '
      f'{\"ok\" if ok else \"FAIL\"}')" "$out/ranks.acc.safetensors" "$out/ranks.acc2.safetensors" "$out/ranks.np.safetensors" 2>&1)$'\n'
else
  echo "ranks: no mpirun on this machine: the check of 2 ranks on one GPU skipped"
fi
publish
fi
if [ "$what" = cudnn ]; then
section "cuDNN's fused attention (mtrun --attention cudnn): the twins (all), attention alone, bf16 plans"
mt 240 mt_cuda_twin_tests > "$out/twins.txt" 2>&1 || echo "twin tests exited $?"
twins=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/twins.txt" | tr '\n' ' ')
echo "$twins"; grep -B2 -A6 'Failure' "$out/twins.txt" | head -60
mt 150 mt_gpu_kernel_rate attention > "$out/kernels.txt" 2>&1 || echo "mt_gpu_kernel_rate exited $?: $(tail -2 "$out/kernels.txt")"
kernel_rows=$(grep -E '^(cuDNN|attention)' "$out/kernels.txt")
echo "$kernel_rows"
for plan in .gpu/plans/llama-tiny-d64-mixed.plan .gpu/plans/llama-tiny-d128-mixed.plan \
  .gpu/plans/llama-tiny-d64-s128-mixed.plan .gpu/plans/llama-tiny-d128-s128-mixed.plan; do
  name=$(basename "$plan" .plan)-cudnn
  for backend in cpu cuda; do
    flag=""; [ $backend = cuda ] && flag="--attention cudnn"
    mt 60 mtrun "$plan" --data .gpu/corpus.tok --steps 10 --backend $backend $flag --log "$out/$name.$backend.jsonl" \
      --export "$out/$name.$backend.safetensors" --dump-grads "$out/$name.$backend.grads.safetensors" --print-every 100 \
      > "$out/$name.$backend.txt" 2>&1 || { echo "$name on $backend failed:"; tail -5 "$out/$name.$backend.txt"; }
  done
  parity+=$(python3 tests/e2e/backend_parity.py "$out/$name" 10 --bf16)$'\n'
done
echo "$parity"
publish
fi
if [ "$what" = all ] || [ "$what" = check ]; then
# CHECK_DECODE=0 skips 2b to 2b'' (the key/value cache, --verify-transfers, --eval-only).
if [ "${CHECK_DECODE:-1}" = 1 ]; then
section "2b. decode plans on cuda: the key/value cache against the window plan, every position"
for model in gpt2-tiny llama-tiny qwen-tiny gpt-oss-tiny; do
  parity+=$(mt 60 kv_cache_check .gpu/kv/$model.window.plan .gpu/kv/$model.decode.plan .gpu/kv/$model.window.safetensors 2>&1 | tail -3)$'\n'
  # bf16: both plans round their activations, at different points of the sum: a looser bound.
  parity+=$(mt 60 kv_cache_check .gpu/kv/$model.window-bf16.plan .gpu/kv/$model.decode-bf16.plan \
    .gpu/kv/$model.window.safetensors 5e-2 2>&1 | tail -3)$'\n'
done
section "2b'. --verify-transfers on cuda: clean (the CPU's losses), and a corrupted copy caught"
first=$(ls .gpu/plans/llama-tiny*.plan | head -1)
mt 60 mtrun "$first" --data .gpu/corpus.tok --steps 3 --backend cuda --verify-transfers --print-every 100 \
  > "$out/verify.txt" 2>&1; parity+="verify-transfers clean (exit $?): $(grep 'transfers verified' "$out/verify.txt")"$'\n'
MT_TEST_CORRUPT_TRANSFER=5 mt 60 mtrun "$first" --data .gpu/corpus.tok --steps 3 --backend cuda --verify-transfers \
  --print-every 100 > "$out/verify-fault.txt" 2>&1
parity+="verify-transfers with a flipped bit (exit $?, want 1): $(grep -o 'the bytes of .* differ' "$out/verify-fault.txt")"$'\n'
section "2b''. --eval-only on cuda (no optimizer tensors allocated or pinned): the CPU's score"
for backend in cpu cuda; do
  mt 60 mtrun .gpu/plans/llama-tiny.plan --data .gpu/corpus.tok --val-fraction 0.05 --val-batches 4 --eval-only \
    --backend $backend --log "$out/eval.$backend.jsonl" > "$out/eval.$backend.txt" 2>&1 ||
    { echo "--eval-only on $backend failed:"; tail -5 "$out/eval.$backend.txt"; }
done
parity+=$(python3 -c "import json, sys
a, b = (json.loads(open(f).read() or '{}') for f in sys.argv[1:])
d = abs(a.get('val_loss', 0) - b.get('val_loss', 1e9))
print(f\"eval-only on cuda: val_loss {b.get('val_loss')}, the cpu's {a.get('val_loss')}: {'ok' if d < 1e-4 else 'FAIL'} ({d:.2g})\")" \
  "$out/eval.cpu.jsonl" "$out/eval.cuda.jsonl" 2>&1)$'\n'
fi
section "2c. --export-hf folders in transformers"
# (their lines alone: transformers' progress bars would push them out of a tail)
parity+=$(timeout 200 python3 bench/gpu/hf_transformers_check.py .gpu/hf/*-f32 .gpu/hf/*-bf16 2>&1 | grep -E '^(hf_transformers|FAIL|Traceback|[A-Za-z]*Error)')$'\n'
section "2d. --export-peft folders in peft, against the same runs' --export-hf"
peft_args=()
for adapter in .gpu/peft/*-adapter; do
  base=.gpu/hf/llama-tiny-f32
  case $adapter in
    */oss-*) base=.gpu/hf/gpt-oss-tiny-f32 ;; */qwen3-*) base=.gpu/hf/qwen3-moe-tiny-f32 ;;
    */gemma3-mm-*) base=.gpu/hf/gemma3-mm ;; */gemma3-*) base=.gpu/hf/gemma3-tiny-f32 ;;
    */phi3-*) base=.gpu/hf/phi3-tiny-f32 ;;
  esac
  peft_args+=("$base" "$adapter" "${adapter%-adapter}-merged")
done
parity+=$(timeout 200 python3 bench/gpu/peft_check.py "${peft_args[@]}" 2>&1 | grep -E '^(peft|Traceback|[A-Za-z]*Error)')$'\n'
section "2e. PEFT's form of adapters on expert stacks (target_parameters), for --export-peft to write"
timeout 120 python3 bench/gpu/peft_layout.py > "$out/peft_layout.txt" 2>&1
parity+=$(grep -E '^(peft_layout|Traceback|[A-Za-z.]*Error)' "$out/peft_layout.txt")$'\n'
echo "$parity"
publish
fi

if [ "$what" = all ] || [ "$what" = bench ] || [ "$what" = attention ] || [ "${BENCH_AFTER_CUDNN:-0}" = 1 ]; then
if [ "${BENCH_KERNELS:-1}" = 1 ]; then
section "3a. kernels alone: our attention and the models' products, then PyTorch's"
mt 150 mt_gpu_kernel_rate > "$out/kernels.txt" 2>&1 || echo "mt_gpu_kernel_rate exited $?: $(tail -2 "$out/kernels.txt")"
timeout 150 python3 bench/gpu/kernel_peer.py > "$out/kernel_peer.txt" 2>&1 || echo "kernel_peer.py exited $?"
kernel_rows=$(grep -E '^(attention|gemm)' "$out/kernels.txt"; grep -E '^torch' "$out/kernel_peer.txt")
publish
fi
section "3. Llama bench plans on cuda"
for model in $bench_models; do
  plan=.gpu/plans/bench-$model.plan name=bench-$model
  modes=$bench_modes; case $model in *-mixed*) modes=bf16 ;; esac  # a bf16 plan: one precision
  for mode in $modes; do
    flag=""; [ $mode = tf32 ] && flag=--tf32
    # bf16 plans: whose attention, mtrun's default (auto: cuDNN's) unless BENCH_ATTENTION="ours
    # cudnn" runs each (the row's name says which).
    engines=auto; [ $mode = bf16 ] && engines=${BENCH_ATTENTION:-auto}
    for engine in $engines; do
    name=bench-$model; [ $engine != auto ] && name=bench-$model-$engine
    [ $mode = bf16 ] && flag="--attention $engine"
    steps=4; case $model in *7b*) steps=3 ;; esac  # a 7B step takes ~15 s: the first is left out
    # The instruction-shaped pair: one example per row, or packed; the rows of a pass said at start.
    data=(--data .gpu/corpus.tok)
    case $model in
      *-rows) data=(--data .gpu/sft.tok --rows examples) ;;
      *-packed) data=(--data .gpu/sft.tok --rows packed-examples) ;;
    esac
    mt 240 mtrun "$plan" "${data[@]}" --steps $steps --backend cuda $flag --print-every 1 --profile \
      --trace "$out/$name.$mode.trace.json" > "$out/$name.$mode.txt" 2>&1 || echo "$name $mode failed or timed out"
    line=$(grep 'measured over' "$out/$name.$mode.txt" | sed 's/measured over //')
    busy=$(grep 'compute busy' "$out/$name.$mode.txt" | sed 's/^ *//')
    pass=$(grep -o 'over the [0-9]* training examples ([^)]*)' "$out/$name.$mode.txt" | head -1)
    rows+="$name $mode: ${line:-no result} | ${busy}${pass:+ | $pass}"$'\n'
    publish
    done
  done
done

if [ "${BENCH_GEN:-1}" = 1 ]; then
section "3b. generation on cuda: mtgen, greedy (the weights are the plans' seeded ones)"
for plan in gen-llama-1b gen-llama-1b-bf16 gen-llama-1b-window; do
  # 8 tokens, then 200: the difference is the time of 192 tokens, start-up (the weights
  # initialised, copied once) and the prompt left out.
  declare -A secs=()
  for n in 8 200; do
    start=$EPOCHREALTIME
    mt 300 mtgen .gpu/plans/$plan.plan --prompt "The" --max-tokens $n --greedy --no-stop --ids --backend cuda \
      > "$out/$plan.$n.txt" 2>&1 || echo "$plan ($n tokens) failed: $(tail -2 "$out/$plan.$n.txt")"
    secs[$n]=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { print b - a }')
  done
  rows+=$(awk -v a="${secs[8]}" -v b="${secs[200]}" -v p="$plan" \
    'BEGIN { printf "%s: 192 tokens in %.2f s, %.2f ms a token", p, b - a, 1000 * (b - a) / 192 }')$'\n'
  publish
done
fi

if [ "${BENCH_PEERS:-1}" = 1 ]; then  # BENCH_PEERS=0: only our plans (e.g. the llama-1b-split pair)
section "4. host optimizer against memory bandwidth (256 M parameters)"
mt 120 mt_adamw_rate 256 > "$out/adamw_rate.txt" 2>&1
adamw_rows=$(cat "$out/adamw_rate.txt")
publish

section "5. PyTorch native"
torch_rows=$(timeout 200 python3 bench/gpu/torch_native.py $bench_models 2>&1 | tee "$out/torch.txt" | grep '^torch')
fi
fi
publish
echo
cat "$out/summary.txt"

