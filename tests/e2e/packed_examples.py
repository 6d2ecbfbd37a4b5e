#!/usr/bin/env python3
"""Packed examples (mtc --packed-examples, mtrun --rows packed-examples): whole instruction
examples packed into each row, each seeing only itself, its positions from 0. Checked against a
PyTorch twin that runs every example of a row alone (its own sequence: causal attention over it,
rotary or learned positions from 0) and takes the loss over the batch's counted targets: the first
step's gradients tensor by tensor and 6 steps' losses within 1e-5 (relative), for Llama (rotary:
mt.rope_at and its inverse), GPT-2 (the position table) and a Gemma 2 folder (its softcapped
scores and logits, its windows, against transformers' arithmetic). The rows are rebuilt here as
runtime/data/example_packing.cc makes them (each pass a shuffle keyed by the seed, packed next fit),
so the test also pins that order. Also: validation over held-out examples packed in order, a
streamed-recompute plan bit for bit the resident one, --accumulate as a bigger batch, a plan not
compiled for packing refused with the fix, and the start saying how many rows a pass packs (in the
file's order: the count --epochs takes) and how much of them is padding.
usage: packed_examples.py BIN_DIR WORK_DIR"""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_folders as folders  # noqa: E402
import hf_twins as twins  # noqa: E402
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
TOL = 1e-5
ZERO_GRAD = 1e-7  # relative to the global gradient norm: a gradient zero in exact arithmetic
BATCH, SEQ = 4, 64
SCHEDULE = ref.Schedule(steps=6, lr=3e-3, warmup=2, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)
MODELS = {"llama-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False),
          "gpt2-tiny": dict(family="gpt2", layers=2, width=64, heads=4, kv_heads=4, tied=True)}


def log_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def check_model(bin_dir, name, tokens, counted, starts, failures, source=None, twin=None, layout=lambda w: w):
    """mtc's model `source` (the built-in `name` where None) trained on packed rows against `twin`
    (params, one example's tokens [T] -> its logits [T, vocab]; ref.forward with MODELS[name] where
    None) running each example alone, over the weights mtc wrote and the gradients mtrun dumped under
    `layout`'s names (a Hugging Face folder's twin takes its own)."""
    plan = f"{name}.plan"
    if twin is None:
        twin = lambda params, x: ref.forward(params, MODELS[name], x[None])[0]  # noqa: E731
    ref.run([f"{bin_dir}/mtc", source or name, "--packed-examples", "--batch", str(BATCH), "--seq", str(SEQ), "-o",
             plan, "--seed", "3"])
    out = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", "examples.tok", "--rows", "packed-examples", "--log",
                          f"{name}.jsonl", "--dump-grads", f"{name}.grads.safetensors", "--print-every", "3"]
                         + SCHEDULE.mtrun_flags(), capture_output=True, text=True)
    print(out.stdout[-1500:])
    if out.returncode != 0:
        failures.append(f"{name}: mtrun --rows packed-examples: exit {out.returncode}: {out.stderr}")
        return
    rows = ref.PackedSampler(tokens, counted, starts, SCHEDULE.seed, BATCH, SEQ)
    params = {k: v.requires_grad_() for k, v in layout(ref.read_safetensors(f"{name}.safetensors")).items()}
    mt_grads = layout(ref.read_safetensors(f"{name}.grads.safetensors"))
    errs = {}

    def first_gradients(step):
        # A gradient zero in exact arithmetic (GPT-2's key bias: softmax ignores a constant added
        # to a row of scores) is float noise on both sides: checked to be noise-sized.
        if step != 1:
            return
        global_norm = sum(float(p.grad.norm()) ** 2 for p in params.values()) ** 0.5
        for n, p in params.items():
            if float(p.grad.norm()) <= ZERO_GRAD * global_norm:
                errs[n] = 0.0 if float(mt_grads[n].norm()) <= ZERO_GRAD * global_norm else float("inf")
            else:
                errs[n] = ref.rel_err(mt_grads[n], p.grad)
    torch_losses = ref.torch_train(params, lambda parts: ref.packed_logits(parts, SEQ, 256, lambda x: twin(params, x)),
                                   tokens, SCHEDULE, after_backward=first_gradients, batch_of=rows.batch)
    loss_err = ref.compare_losses([line["loss"] for line in log_of(f"{name}.jsonl")], torch_losses, TOL, failures)
    worst = max(errs, key=errs.get)
    if errs[worst] > TOL:
        failures.append(f"{name}: the gradient of {worst} is {errs[worst]:.2e} from PyTorch's")
    per_row = [len(rows.row(g)) for g in range(BATCH * SCHEDULE.steps)]
    print(f"{name}: first step's gradients within {errs[worst]:.1e}, {SCHEDULE.steps} losses within {loss_err:.1e} "
          f"of each example run alone (examples per row: {per_row})")
    if max(per_row) < 2:
        failures.append(f"{name}: no row held two examples: the packing is untested")
    in_order = len(ref.pack_next_fit(range(len(starts)), rows.lengths, SEQ))
    padding = 100 * (1 - np.minimum(rows.lengths, SEQ).sum() / (in_order * SEQ))
    if f"packed into about {in_order} rows a pass, each once; {padding:.0f}% padding" not in out.stdout:
        failures.append(f"{name}: the start does not say a pass packs about {in_order} rows (the file's order), "
                        f"{padding:.0f}% padding")


def validation(bin_dir, cfg, tokens, counted, starts, failures):
    """--val-fraction with packed examples: the held-out examples in order, packed, the mean over
    their counted targets."""
    out = subprocess.run([f"{bin_dir}/mtrun", "llama-tiny.plan", "--data", "examples.tok", "--weights",
                          "llama-tiny.safetensors", "--rows", "packed-examples", "--steps", "1", "--lr", "0",
                          "--val-fraction", "0.1", "--log", "val.jsonl"], capture_output=True, text=True)
    split = int(len(tokens) - int(0.1 * len(tokens)))
    held = [i for i, s0 in enumerate(starts) if s0 >= split]
    lengths = np.diff(np.append(starts, len(tokens)))
    weights = ref.read_safetensors("llama-tiny.safetensors")
    total, n = 0.0, 0
    with torch.no_grad():
        for row in ref.pack_next_fit(held, lengths, SEQ):
            for i in row:
                x, y = ref.packed_example(tokens, counted, starts, i, SEQ)
                logits = ref.forward(weights, cfg, x[None])[0]
                total += float(F.cross_entropy(logits, y, reduction="sum", ignore_index=-100))
                n += int((y != -100).sum())
    if ref.validation_matches("packed validation", "val.jsonl", out, total / n, TOL, failures):
        print(f"validation over {len(held)} held-out examples packed in order: {total / n:.6f}, as mtrun's")


def schedules_and_accumulation(bin_dir, failures):
    """The positions reach every block of a streamed-recompute plan (its recomputed forward too):
    its weights after 4 steps are the resident plan's bit for bit; --accumulate 2 at batch 2 draws
    the rows of one step of batch 4 (the step's rows run on in the packed sequence) and 2 token
    tiles split each block's token-wise work: the same weights within fp32 rounding (as AdamW
    enlarges it, for --accumulate's other order of sums). A bf16 plan
    trains (its weights within 5 %: a check that it runs, its activations rounded; the mask is the
    same f32 kernels' on the CPU, checked above)."""
    common = ["--data", "examples.tok", "--weights", "llama-tiny.safetensors", "--rows", "packed-examples",
              "--steps", "4", "--print-every", "100"]
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--packed-examples", "--batch", str(BATCH), "--seq", str(SEQ),
             "--schedule", "streamed-recompute", "-o", "recompute.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--packed-examples", "--batch", str(BATCH // 2), "--seq", str(SEQ),
             "-o", "half.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--packed-examples", "--batch", str(BATCH), "--seq", str(SEQ),
             "--token-tiles", "2", "-o", "tiled.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--packed-examples", "--batch", str(BATCH), "--seq", str(SEQ),
             "--precision", "bf16", "-o", "bf16.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtrun", "llama-tiny.plan", "--export", "resident.safetensors"] + common)
    ref.run([f"{bin_dir}/mtrun", "recompute.plan", "--export", "recompute.safetensors"] + common)
    ref.run([f"{bin_dir}/mtrun", "half.plan", "--accumulate", "2", "--export", "half.safetensors"] + common)
    ref.run([f"{bin_dir}/mtrun", "tiled.plan", "--export", "tiled.safetensors"] + common)
    ref.run([f"{bin_dir}/mtrun", "bf16.plan", "--export", "bf16.safetensors"] + common)
    resident = ref.read_safetensors("resident.safetensors")
    recompute = ref.read_safetensors("recompute.safetensors")
    differ = [n for n in resident if not torch.equal(resident[n], recompute[n])]
    if differ:
        failures.append(f"streamed-recompute's weights differ from resident's: {differ}")
    errs = {what: max(ref.rel_err(ref.read_safetensors(f"{what}.safetensors")[n], resident[n]) for n in resident)
            for what in ("half", "tiled", "bf16")}
    # --accumulate sums two micro-batches' gradients where one batch sums them at once, in another
    # order: rounding AdamW's division by sqrt(v) enlarges where a gradient is near 0 (1.25e-5 on an
    # AMD EPYC with OpenBLAS's Zen kernels, under 1e-5 with its Cooperlake ones), hence 3e-5.
    for what, tol in (("half", 3e-5), ("tiled", TOL), ("bf16", 0.05)):
        if not errs[what] <= tol:
            failures.append(f"{what}.plan's weights after 4 steps are {errs[what]:.2e} from the resident plan's")
    print(f"streamed-recompute: the resident plan's weights bit for bit; after 4 steps --accumulate 2 x batch 2 "
          f"within {errs['half']:.1e}, 2 token tiles within {errs['tiled']:.1e}, bf16 within {errs['bf16']:.1e}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    tokens = ref.read_tokens(ref.make_corpus(bin_dir, work))
    counted = (np.sin(np.arange(len(tokens)) / 7.3) > 0.3).astype(np.uint8)
    # Examples of 5 to 27 tokens, every 17th of 80 (longer than a row: cut): one to seven in a row.
    i = np.arange(12000)
    lengths = np.where(i % 17 == 16, 80, 5 + (i * 37) % 23)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    starts = starts[starts < len(tokens)]
    ref.write_tokens("examples.tok", tokens, 256, counted, starts)
    failures = []
    for name in MODELS:
        check_model(bin_dir, name, tokens, counted, starts, failures)
    # Gemma 2 (hf_import's folder): its softcapped scores and logits and its 8-token windows inside
    # each example, against transformers' arithmetic (twins.gemma_logits) on each example alone.
    gemma2 = folders.MODELS["gemma2-f32"]
    folders.write_folder("gemma2", gemma2, folders.hf_weights(gemma2["config"], False, gemma2["dtype"], seed=3))
    check_model(bin_dir, "gemma2-f32", tokens, counted, starts, failures, source="gemma2",
                twin=lambda params, x: twins.hf_logits(params, gemma2["config"], x[None])[0],
                layout=lambda w: folders.hf_layout(w, gemma2))
    validation(bin_dir, MODELS["llama-tiny"], tokens, counted, starts, failures)
    schedules_and_accumulation(bin_dir, failures)
    # Without --rows, a plan of packed examples on a file of examples packs them, saying so.
    out = subprocess.run([f"{bin_dir}/mtrun", "llama-tiny.plan", "--data", "examples.tok", "--steps", "1"],
                         capture_output=True, text=True)
    if out.returncode != 0 or "--rows packed-examples: a plan of packed examples on token files of examples" \
            not in out.stdout or "packed into about" not in out.stdout:
        failures.append(f"no --rows with a plan of packed examples: exit {out.returncode}: {out.stdout[-600:]}")
    # --rows examples says its padding; without --rows, a --val-data file that records no examples
    # keeps the windows (the default packs only where every file can be).
    out = subprocess.run([f"{bin_dir}/mtrun", "llama-tiny.plan", "--data", "examples.tok", "--steps", "1", "--rows",
                          "examples"], capture_output=True, text=True)
    lengths = np.diff(np.append(starts, len(tokens)))
    padding = 100 * (1 - np.minimum(lengths, SEQ).sum() / (len(starts) * SEQ))
    if out.returncode != 0 or f"(one per row, padded: {padding:.0f}% padding)" not in out.stdout:
        failures.append(f"--rows examples does not say its {padding:.0f}% padding: {out.stdout[-400:]}{out.stderr}")
    out = subprocess.run([f"{bin_dir}/mtrun", "llama-tiny.plan", "--data", "examples.tok", "--val-data", "data.tok",
                          "--steps", "1"], capture_output=True, text=True)
    if out.returncode != 0 or "packed-examples" in out.stdout:
        failures.append(f"--val-data without examples: exit {out.returncode}: {out.stdout[-400:]}{out.stderr}")
    # A plan not compiled for packing is refused, naming the fix.
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--batch", str(BATCH), "--seq", str(SEQ), "-o", "plain.plan",
             "--no-weights"])
    out = subprocess.run([f"{bin_dir}/mtrun", "plain.plan", "--data", "examples.tok", "--rows", "packed-examples",
                          "--steps", "1"], capture_output=True, text=True)
    if out.returncode != 1 or "mtc --packed-examples" not in out.stderr:
        failures.append(f"a plain plan with --rows packed-examples: exit {out.returncode}: {out.stderr}")
    else:
        print(f"a plain plan refused: {out.stderr.strip()}")
    ref.finish("packed_examples", failures)


if __name__ == "__main__":
    main()
