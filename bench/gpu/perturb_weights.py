"""Writes a plan's starting weights perturbed by a relative EPS (seeded): each element times
(1 + EPS * N(0, 1)); a tensor whose values are all bf16 is rounded back to bf16, so that a frozen
weight a plan holds as bf16 alone stays loadable (it moves by whole bf16 steps where the noise
crosses one). That catches trainable tensors that start bf16-exact too (norms at 1, zero biases:
zero does not move anyway), which then move less than EPS: the spread is, if anything, too small. run.sh's bf16 parity plans run once more on the cpu from these weights: the
cpu's own spread, against which backend_parity.py --spread judges the cuda run.
usage: python3 bench/gpu/perturb_weights.py IN.safetensors OUT.safetensors EPS [SEED]   (seed 1 by default)"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "e2e"))
import mt_reference as ref  # noqa: E402


def main():
    source, target, eps = sys.argv[1], sys.argv[2], float(sys.argv[3])
    g = torch.Generator().manual_seed(int(sys.argv[4]) if len(sys.argv) > 4 else 1)
    out = {}
    for name, w in ref.read_safetensors(source).items():
        moved = w * (1 + eps * torch.randn(w.shape, generator=g, dtype=w.dtype))
        out[name] = moved.bfloat16().to(w.dtype) if torch.equal(w.bfloat16().to(w.dtype), w) else moved
    ref.write_safetensors(target, out)


main()
