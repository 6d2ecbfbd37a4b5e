"""A bf16 plan against PyTorch's bf16 autocast: a built-in model compiled with mtc --precision bf16
and trained by mtrun (CPU backend, bf16 storage emulated) must stay, for 20 steps from the same
initial weights on the same batches, within bf16 rounding of PyTorch under
torch.autocast("cpu", bfloat16) (each loss within 5e-3 relative) and of PyTorch in fp32. The two
recipes differ in what they round (autocast keeps norms, softmax and the residual stream in fp32;
our bf16 plan stores every activation in bf16, with f32 statistics and accumulation), so the
comparison is a tolerance, printed beside autocast's own distance from fp32 for scale.

usage: /usr/bin/python3 tests/e2e/bf16_torch.py BIN_DIR WORK_DIR MODEL
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from torch_parity import PRESETS, BATCH, SEQ, SCHEDULE  # noqa: E402

torch.set_num_threads(2)
TOL = 5e-3


def main():
    bin_dir, work, model = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = dict(PRESETS[model])
    os.makedirs(work, exist_ok=True)
    plan, weights, log = (os.path.join(work, n) for n in ("m.plan", "m.safetensors", "log.jsonl"))
    data = ref.make_corpus(bin_dir, work)
    ref.run([f"{bin_dir}/mtc", model, "--batch", str(BATCH), "--seq", str(SEQ), "--precision", "bf16", "-o", plan,
         "--seed", "3"])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--log", log, "--print-every", "10"]
        + SCHEDULE.mtrun_flags())
    mt_losses = [json.loads(line)["loss"] for line in open(log)]
    tokens = ref.read_tokens(data)

    def train(autocast):
        params = {k: v.requires_grad_() for k, v in ref.read_safetensors(weights).items()}

        def logits_of(x):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                return ref.forward(params, cfg, x).float()
        return ref.torch_train(params, logits_of, tokens, SCHEDULE)

    fp32, autocast = train(False), train(True)
    failures = []
    worst_autocast = ref.compare_losses(mt_losses, autocast, TOL, failures)
    worst_fp32 = ref.compare_losses(mt_losses, fp32, TOL, failures)
    scale = max(abs(a - b) / abs(b) for a, b in zip(autocast, fp32))
    print(f"{SCHEDULE.steps} steps: losses {mt_losses[0]:.4f} -> {mt_losses[-1]:.4f}; worst relative difference "
          f"against autocast {worst_autocast:.3e}, against fp32 {worst_fp32:.3e} (autocast against fp32: {scale:.3e})")
    if not mt_losses[-1] < mt_losses[0] - 0.5:
        failures.append(f"the bf16 run did not learn: {mt_losses[0]:.4f} -> {mt_losses[-1]:.4f}")
    ref.finish(f"{model} bf16", failures)


if __name__ == "__main__":
    main()
