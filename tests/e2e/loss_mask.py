#!/usr/bin/env python3
"""Token files with a loss mask (version 2: a 0/1 byte per token after the ids): a target the mask
leaves out is not counted, the loss and its gradient the mean over the counted ones, as PyTorch's
cross_entropy(ignore_index=-100). Checked against a PyTorch twin on the same batches: the first
step's gradients tensor by tensor within 1e-5 and 10 steps' losses within 1e-5 (relative); with
--accumulate 2 at batch 2, each micro-batch weighed by its counted targets, the run of one plan of
batch 4 within fp32 rounding; a file whose mask counts nothing trains without NaN and leaves the
weights as they were (each step says it updated nothing). A version-3 file (the examples' starts
recorded, as mttok --chat writes) with --rows examples: each row one example from its start, cut past
the row, padded with targets the loss ignores; its gradients and losses against the same PyTorch
twin on those rows, and validation over the held-out examples.
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

    grad_err, loss_err = against_torch("", "grads.safetensors", mt_losses, tokens, failures, counted=counted)
    print(f"first step's gradients within {grad_err:.1e} of PyTorch's; {SCHEDULE.steps} steps' losses within "
          f"{loss_err:.1e} of cross_entropy(ignore_index=-100)")

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

    examples(bin_dir, tokens, counted, failures)

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


def against_torch(what, grads_path, mt_losses, tokens, failures, counted=None, batch_of=None):
    """The PyTorch twin trained from m.safetensors on the same batches (the packed sampler's, or
    `batch_of`'s): the first step's gradients (mtrun's in `grads_path`) and the losses compared
    within TOL. Returns the worst gradient and loss errors."""
    params = {k: v.requires_grad_() for k, v in ref.read_safetensors("m.safetensors").items()}
    mt_grads = ref.read_safetensors(grads_path)
    errs = {}

    def first_gradients(step):
        if step == 1:
            errs.update({n: ref.rel_err(mt_grads[n], p.grad) for n, p in params.items()})
    torch_losses = ref.torch_train(params, lambda x: ref.forward(params, CFG, x), tokens, SCHEDULE,
                                   after_backward=first_gradients, counted=counted, batch_of=batch_of)
    worst = max(errs, key=errs.get)
    if errs[worst] > TOL:
        failures.append(f"{what}the gradient of {worst} is {errs[worst]:.2e} from PyTorch's")
    return errs[worst], ref.compare_losses(mt_losses, torch_losses, TOL, failures)


def examples(bin_dir, tokens, counted, failures):
    """--rows examples on a version-3 file: examples of 8 to 47 tokens (some longer than a row of
    SEQ + 1: cut), mtrun against PyTorch on the same rows."""
    lengths = 8 + (np.arange(8000) * 37) % 40
    starts = np.concatenate([[0], np.cumsum(lengths)])
    starts = starts[starts < len(tokens)]
    ref.write_tokens("examples.tok", tokens, 256, counted, starts)
    out = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "examples.tok", "--weights", "m.safetensors",
                          "--rows", "examples", "--log", "ex.jsonl", "--dump-grads", "ex.grads.safetensors",
                          "--print-every", "5"] + SCHEDULE.mtrun_flags(), capture_output=True, text=True)
    if out.returncode != 0:
        failures.append(f"--rows examples: exit {out.returncode}: {out.stdout}{out.stderr}")
        return
    cut = int((np.diff(np.append(starts, len(tokens))) > SEQ + 1).sum())
    if f"{cut} of the {len(starts)} examples are longer than a row" not in out.stdout:
        failures.append(f"--rows examples: the start does not say {cut} of {len(starts)} examples are cut:\n{out.stdout}")
    grad_err, loss_err = against_torch(
        "--rows examples: ", "ex.grads.safetensors", [line["loss"] for line in log_of("ex.jsonl")], tokens, failures,
        batch_of=lambda step: ref.batch_examples(tokens, counted, starts, step, BATCH, SEQ, SCHEDULE.seed))
    padded = [int((ref.batch_examples(tokens, counted, starts, s, BATCH, SEQ, SCHEDULE.seed)[0] == 0).sum())
              for s in range(SCHEDULE.steps)]
    print(f"--rows examples: first step's gradients within {grad_err:.1e}, {SCHEDULE.steps} losses within "
          f"{loss_err:.1e} of PyTorch's on the same rows ({cut} of {len(starts)} examples cut; padded positions per "
          f"step {padded})")
    if not any(padded):
        failures.append("--rows examples: no step had padding: the padding is untested")
    # Validation over the held-out examples: one row each, the mean over their counted targets.
    out = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "examples.tok", "--weights", "m.safetensors",
                          "--rows", "examples", "--steps", "1", "--lr", "0", "--val-fraction", "0.1", "--log",
                          "exval.jsonl", "--print-every", "5"], capture_output=True, text=True)
    split = int(len(tokens) - int(0.1 * len(tokens)))
    held = [i for i, s0 in enumerate(starts) if s0 >= split]
    total, n = 0.0, 0
    weights = ref.read_safetensors("m.safetensors")
    with torch.no_grad():
        for i in held:
            x, y = ref.example_row(tokens, counted, starts, i, SEQ)
            logits = ref.forward(weights, CFG, torch.tensor(x)[None])
            total += float(torch.nn.functional.cross_entropy(logits[0], torch.tensor(y), reduction="sum",
                                                             ignore_index=-100))
            n += int((y != -100).sum())
    if ref.validation_matches("--rows examples validation", "exval.jsonl", out, total / n, TOL, failures):
        print(f"--rows examples validation over {len(held)} held-out examples: {total / n:.6f}, as mtrun's")


main()
