"""PyTorch peer for bench/cpu_train.sh: trains the same architecture (tests/e2e/mt_reference.py)
with AdamW on the same token file and prints tokens/s as JSON."""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import mt_reference as ref  # noqa: E402


def main():
    weights, data, steps, batch, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    cfg = json.loads(sys.argv[6])
    torch.set_num_threads(os.cpu_count())
    params = {k: v.requires_grad_() for k, v in ref.read_safetensors(weights).items()}
    opt = torch.optim.AdamW([{"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": 0.1},
                             {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    tokens = ref.read_tokens(data)
    times, losses = [], []
    for step in range(steps):
        x, y = ref.batch(tokens, step, batch, seq, 1)
        start = time.perf_counter()
        logits = ref.forward(params, cfg, x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    steady = times[1:] if len(times) > 1 else times
    print(json.dumps({"tokens_per_s": batch * seq * len(steady) / sum(steady), "losses": losses,
                      "blas": torch.__config__.show().count("OpenBLAS") > 0}))


if __name__ == "__main__":
    main()
