#!/usr/bin/env bash
# Copies what run.sh needs of the published MegaTrain (its library infinity/, its
# examples/sft/train.py and its LICENSE, Apache-2.0; ~350 KB) from a git snapshot of
# DLYuanGod/MegaTrain into .peer/megatrain, which git ignores: its code never enters this
# repository, and the device tool carries the folder (carry=[".peer/megatrain"]).
# usage: bash bench/gpu/megatrain_peer/fetch.sh GIT_DIR [COMMIT]
#   GIT_DIR: the snapshot the search tool's `fetch github:DLYuanGod/MegaTrain` makes
#   (/work/.mirror/DLYuanGod+MegaTrain/repo); COMMIT: 919520f (2026-04-18) unless given, the one
#   whose single-GPU path run.sh's patches were written against.
set -euo pipefail
git_dir=${1:?usage: fetch.sh GIT_DIR [COMMIT]} commit=${2:-919520f07182c0d4d3e9765b2f915702e71c11a4}
cd "$(dirname "$0")/../../.."
rm -rf .peer/megatrain && mkdir -p .peer/megatrain
git --git-dir="$git_dir" archive --format=tar "$commit" infinity examples/sft/train.py LICENSE |
  tar -x -C .peer/megatrain --exclude='*__pycache__*' --exclude='*/build/*' --exclude='*.egg-info*'
du -sh .peer/megatrain
