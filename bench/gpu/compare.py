"""Compares one plan's 10-step run on cpu and cuda (bench/gpu/run.sh): prints one line."""
import json
import struct
import sys

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    return {name: torch.frombuffer(bytearray(data[m["data_offsets"][0]:m["data_offsets"][1]]), dtype=torch.float32)
            for name, m in header.items() if name != "__metadata__"}


def main():
    prefix = sys.argv[1]
    try:
        losses = [[json.loads(line)["loss"] for line in open(f"{prefix}.{b}.jsonl")] for b in ("cpu", "cuda")]
        weights = [read_safetensors(f"{prefix}.{b}.safetensors") for b in ("cpu", "cuda")]
    except OSError as e:
        print(f"{prefix.split('/')[-1]}: FAIL (missing output: {e})")
        return
    loss_err = max(abs(a - b) / abs(a) for a, b in zip(*losses))
    weight_err = max(float((weights[1][k] - w).norm() / w.norm().clamp_min(1e-30)) for k, w in weights[0].items())
    ok = len(losses[1]) == 10 and loss_err <= 1e-4 and weight_err <= 1e-3
    print(f"{prefix.split('/')[-1]}: {'ok' if ok else 'FAIL'} losses within {loss_err:.1e}, weights within "
          f"{weight_err:.1e} (10 steps, cuda vs cpu)")


main()
