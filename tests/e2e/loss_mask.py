#!/usr/bin/env python3
"""Token files with a loss mask (version 2: a 0/1 byte per token after the ids): a target the mask
leaves out is not counted, the loss and its gradient the mean over the counted ones, as PyTorch's
cross_entropy(ignore_index=-100). Checked against a PyTorch twin on the same batches: the first
step's gradients tensor by tensor within 1e-5 and 10 steps' losses within 1e-5 (relative); with
--accumulate 2 at batch 2, each micro-batch weighed by its counted targets, the run of one plan of
batch 4 within fp32 rounding; a file whose mask counts nothing trains without NaN and leaves the
weights as they were (each step says it updated nothing).
usage: loss_mask.py BIN_DIR WORK_DIR"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
TOL = 1e-5
BATCH, SEQ = 4, 32
SCHEDULE = ref.Schedule(steps=10, lr=3e-3, warmup=2, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)
CFG = dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False)  # llama-tiny


def log_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    tokens = ref.read_tokens(ref.make_corpus(bin_dir, work))
    # "Prompts" and "responses": runs of uneven lengths, so that micro-batches count different
    # numbers of targets (the accumulation must weigh them).
    counted = (np.sin(np.arange(len(tokens)) / 7.3) > 0.3).astype(np.uint8)
    ref.write_tokens("masked.tok", tokens, 256, counted)
    ref.write_tokens("nothing.tok", tokens, 256, np.zeros(len(tokens), dtype=np.uint8))
    failures = []

    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--batch", str(BATCH), "--seq", str(SEQ), "-o", "m.plan", "--seed", "3"])
    ref.run([f"{bin_dir}/mtrun", "m.plan", "--data", "masked.tok", "--log", "m.jsonl", "--dump-grads",
             "grads.safetensors", "--print-every", "5"] + SCHEDULE.mtrun_flags())
    log = log_of("m.jsonl")
    mt_losses = [line["loss"] for line in log]
    want_counted = [int((ref.batch(tokens, s, BATCH, SEQ, SCHEDULE.seed, counted)[1] != -100).sum())
                    for s in range(SCHEDULE.steps)]
    halves = [[int((y != -100).sum()) for y in ref.batch(tokens, s, BATCH, SEQ, SCHEDULE.seed, counted)[1].split(2)]
              for s in range(SCHEDULE.steps)]
    if all(a == b for a, b in halves):
        failures.append(f"every step's two halves count alike ({halves}): the accumulation's weighting is untested")
    if [line.get("tokens_counted") for line in log] != want_counted:
        failures.append(f"tokens_counted {[line.get('tokens_counted') for line in log]}, want {want_counted}")
    print(f"targets counted per step: {want_counted} of {BATCH * SEQ}")

    params = {k: v.requires_grad_() for k, v in ref.read_safetensors("m.safetensors").items()}
    mt_grads = ref.read_safetensors("grads.safetensors")
    grad_errs = {}

    def first_gradients(step):
        if step == 1:
            grad_errs.update({n: ref.rel_err(mt_grads[n], p.grad) for n, p in params.items()})
    torch_losses = ref.torch_train(params, lambda x: ref.forward(params, CFG, x), tokens, SCHEDULE,
                                   after_backward=first_gradients, counted=counted)
    worst = max(grad_errs, key=grad_errs.get)
    print(f"first step's gradients within {grad_errs[worst]:.1e} of PyTorch's (worst {worst})")
    if grad_errs[worst] > TOL:
        failures.append(f"the gradient of {worst} is {grad_errs[worst]:.2e} from PyTorch's")
    loss_err = ref.compare_losses(mt_losses, torch_losses, TOL, failures)
    print(f"{SCHEDULE.steps} steps' losses within {loss_err:.1e} of cross_entropy(ignore_index=-100)")

    # --accumulate 2 at batch 2 against batch 4: the same sequences, each micro-batch weighed by
    # its counted targets.
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--batch", "2", "--seq", str(SEQ), "-o", "half.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtrun", "half.plan", "--data", "masked.tok", "--weights", "m.safetensors", "--accumulate",
             "2", "--log", "acc.jsonl", "--export", "acc.safetensors", "--print-every", "5"] + SCHEDULE.mtrun_flags())
    ref.run([f"{bin_dir}/mtrun", "m.plan", "--data", "masked.tok", "--log", "whole.jsonl", "--export",
             "whole.safetensors", "--print-every", "5"] + SCHEDULE.mtrun_flags())
    acc, whole = ref.read_safetensors("acc.safetensors"), ref.read_safetensors("whole.safetensors")
    acc_err = max(ref.rel_err(acc[n], whole[n]) for n in whole)
    acc_loss = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(log_of("acc.jsonl"), log_of("whole.jsonl")))
    print(f"--accumulate 2 x batch 2 vs batch 4: losses within {acc_loss:.1e}, weights within {acc_err:.1e}")
    if acc_err > TOL or acc_loss > TOL:
        failures.append(f"--accumulate with a loss mask: weights {acc_err:.2e}, losses {acc_loss:.2e} from batch 4's")

    # Nothing counted: no NaN, no update, and each step says so.
    out = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "nothing.tok", "--steps", "3", "--log",
                          "nothing.jsonl", "--export", "nothing.safetensors", "--print-every", "1"],
                         capture_output=True, text=True)
    nothing = log_of("nothing.jsonl") if out.returncode == 0 else []
    same = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "same_tensors.py"), "m.safetensors", "nothing.safetensors"])
    if (out.returncode != 0 or len(nothing) != 3 or any(line.get("skipped") != "no target counted" for line in nothing)
            or out.stdout.count("no target counted") != 3 or same.returncode != 0):
        failures.append(f"a file that counts nothing: exit {out.returncode}, log {nothing}, weights "
                        f"{'unchanged' if same.returncode == 0 else 'changed'}:\n{out.stdout}{out.stderr}")
    else:
        print("a mask that counts nothing: 3 steps without NaN, no update, weights unchanged")
    ref.finish("loss_mask", failures)


main()
