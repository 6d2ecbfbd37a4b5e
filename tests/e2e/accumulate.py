#!/usr/bin/env python3
"""mtrun --accumulate N at batch B against one plan of batch N*B: the same sequences per
optimizer step (micro-batch m holds rows [m*B, (m+1)*B) of the big batch), so the first step's
gradients, every step's loss and the trained weights agree to fp32 rounding (the sums are taken
in another order). For each update kind: the deferred update (exact clipping) resident and
streamed-recompute, and the on-arrival update (gradients consumed as they land: the host keeps
the running sums). A run resumed from a checkpoint of an accumulated run is bit-identical to
the uninterrupted one. Tolerances (relative, norm-wise; measured: gradients 3.9e-7, losses 9.4e-8,
weights 7.9e-7): gradients 2e-6, losses 1e-6, weights after 6 steps 1e-5.
usage: accumulate.py BIN_DIR WORK_DIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

GRAD_TOL, LOSS_TOL, WEIGHT_TOL = 2e-6, 1e-6, 1e-5
STEPS, MICRO, BATCH = 6, 4, 2
MODEL = ["llama-tiny", "--layers", "3", "--width", "64", "--heads", "4", "--kv-heads", "2", "--ffn", "128",
         "--vocab", "256", "--seq", "32"]
VARIANTS = {  # name: mtc flags
    "resident": ["--schedule", "resident"],
    "streamed": ["--schedule", "streamed-recompute"],
    "on-arrival": ["--schedule", "streamed-recompute", "--update", "on-arrival"],
    # The tied table's gradient: the head's lands, the host scatter-adds the lookup's rows onto it.
    "host-embedding": ["--schedule", "streamed-recompute", "--embedding", "host", "--tied"],
}


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f]


def train(bin_dir, data, plan, weights, name, *flags):
    cmd = [f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--steps", str(STEPS), "--log",
           f"{name}.jsonl", "--export", f"{name}.safetensors", "--print-every", "100", *flags]
    ref.run(cmd)
    return losses(f"{name}.jsonl"), ref.read_safetensors(f"{name}.safetensors")


def compare(what, a, b, tol, failures):
    worst = max(a, key=lambda n: ref.rel_err(a[n], b[n]))
    err = ref.rel_err(a[worst], b[worst])
    print(f"  {what}: within {err:.1e} (worst {worst})")
    if err > tol:
        failures.append(f"{what}: {worst} differs by {err:.2e} relative (tolerance {tol:.0e})")


def variant(bin_dir, data, name, flags, failures):
    print(f"{name}:")
    ref.run([f"{bin_dir}/mtc", *MODEL, *flags, "--batch", str(BATCH), "-o", f"{name}.small.plan", "--weights",
             f"{name}.w0.safetensors"])
    ref.run([f"{bin_dir}/mtc", *MODEL, *flags, "--batch", str(BATCH * MICRO), "-o", f"{name}.big.plan",
             "--no-weights"])
    deferred = "on-arrival" not in flags
    # On arrival nothing can be clipped (no global norm before the update) or dumped (nothing kept).
    def run_flags(run):
        return ["--dump-grads", f"{name}.{run}.grads.safetensors"] if deferred else ["--grad-clip", "0"]
    small_loss, small = train(bin_dir, data, f"{name}.small.plan", f"{name}.w0.safetensors", f"{name}.small",
                              "--accumulate", str(MICRO), *run_flags("small"))
    big_loss, big = train(bin_dir, data, f"{name}.big.plan", f"{name}.w0.safetensors", f"{name}.big",
                          *run_flags("big"))
    if deferred:
        compare("first step's gradients", ref.read_safetensors(f"{name}.small.grads.safetensors"),
                ref.read_safetensors(f"{name}.big.grads.safetensors"), GRAD_TOL, failures)
    loss_err = max(abs(a - b) / abs(b) for a, b in zip(small_loss, big_loss))
    print(f"  losses of {STEPS} steps: within {loss_err:.1e}")
    if len(small_loss) != STEPS or loss_err > LOSS_TOL:
        failures.append(f"{name}: losses {small_loss} vs batch {BATCH * MICRO}'s {big_loss}")
    compare(f"weights after {STEPS} steps", small, big, WEIGHT_TOL, failures)
    # A plain run at batch B trains on other sequences: the comparison above can fail.
    plain_loss, _ = train(bin_dir, data, f"{name}.small.plan", f"{name}.w0.safetensors", f"{name}.plain",
                          *run_flags("plain"))
    if max(abs(a - b) / abs(b) for a, b in zip(plain_loss[1:], big_loss[1:])) < 1e-3:
        failures.append(f"{name}: batch {BATCH} without --accumulate trains like batch {BATCH * MICRO}: the test "
                        "cannot tell accumulation from none")


def resume(bin_dir, data, failures):
    """Checkpoint after step 3 of an accumulated run, resume: the same weights as straight through."""
    plan, weights = "streamed.small.plan", "streamed.w0.safetensors"
    common = ["--accumulate", str(MICRO), "--min-lr-ratio", "1", "--print-every", "100"]
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--steps", str(STEPS), *common,
             "--export", "straight.safetensors"])
    shutil.rmtree("ckpt", ignore_errors=True)
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--steps", "3", *common,
             "--checkpoint-dir", "ckpt"])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--steps", str(STEPS), *common,
             "--resume", "ckpt", "--export", "resumed.safetensors"])
    same = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "same_tensors.py"),
                           "straight.safetensors", "resumed.safetensors"])
    print(f"resumed at step 3 of an accumulated run: {'bit-identical' if same.returncode == 0 else 'DIFFERENT'}")
    if same.returncode != 0:
        failures.append("a run resumed from a checkpoint of an accumulated run differs from the straight one")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    data = ref.make_corpus(bin_dir, work)
    failures = []
    for name, flags in VARIANTS.items():
        variant(bin_dir, data, name, flags, failures)
    resume(bin_dir, data, failures)
    ref.finish("accumulate", failures)


main()
