#!/usr/bin/env bash
# The main job on a fresh machine: build, tokenise the fortunes corpus (bytes), compile the
# built-in gpt2-demo model into a plan, and train it (on the GPU when one is present and usable,
# else on the CPU backend) while the loss falls. Extra arguments go to mtrun and override its
# flags here (e.g. --steps 100; under 50 steps also --warmup, which is 50 here). Ends by printing a
# sample of what the model learned (mtgen).
set -euo pipefail
cd "$(dirname "$0")/.."
MT_BUILD_TARGETS="mttok mtc mtrun mtgen" bash tools/build.sh  # only what the demo runs
mkdir -p demo
corpus=$(find /usr/share/games/fortunes -type f ! -name '*.dat' ! -name '*.u8' | sort)
build/bin/mttok --bytes $corpus -o demo/fortunes.tok
build/bin/mtc gpt2-demo --batch 16 --seq 128 -o demo/gpt2-demo.plan
build/bin/mtrun demo/gpt2-demo.plan --data demo/fortunes.tok --weights demo/gpt2-demo.safetensors \
  --steps 500 --lr 2e-3 --warmup 50 --print-every 25 --log demo/train.jsonl \
  --export demo/gpt2-demo.trained.safetensors "$@"
# What it learned: a fortune sampled from the trained weights through a forward-only plan.
build/bin/mtc gpt2-demo --forward-only --kv-cache --batch 1 --seq 128 --no-weights -o demo/gpt2-demo.gen.plan \
  > /dev/null
echo
echo "A sample from the trained model (mtgen, temperature 0.8):"
build/bin/mtgen demo/gpt2-demo.gen.plan --weights demo/gpt2-demo.trained.safetensors --prompt "Q: " \
  --temperature 0.8 --max-tokens 200 --seed 7
