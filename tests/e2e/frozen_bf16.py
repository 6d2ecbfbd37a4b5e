"""Frozen weights held as bf16 alone (plan 1.32): in a bf16 plan, a frozen parameter whose folder
tensor is BF16 keeps its staging copy as all of its master (2 host bytes, not 4: the residual of a
bf16 value is zero). The same weights in a BF16 folder and widened in an F32 folder train bit for
bit alike under LoRA, and export the same folder; the BF16 one needs 2 fewer host bytes per frozen
weight. 2 ranks sharing the host copy give --accumulate 2's weights; a checkpoint resumes to the
same weights as the run straight through. A weights file whose frozen values are not bf16 is
refused by name, before any step; mtc --frozen-fp32 keeps the fp32 masters, which take it.

usage: /usr/bin/python3 tests/e2e/frozen_bf16.py BIN_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from hf_folders import MODELS, hf_weights, read_hf_safetensors, write_folder  # noqa: E402

torch.set_num_threads(2)
SHAPE = ["--batch", "4", "--seq", "32", "--precision", "bf16"]
LORA = ["--lora", "4", "--lora-targets", "proj"]


def output(cmd):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def host_bytes(mtrun_out):
    """mtrun's host bytes per parameter ("host 16.5 MiB (5.1 bytes/param)")."""
    return float(re.search(r"host [0-9.]+ [KMG]?i?B \(([0-9.]+) bytes/param\)", mtrun_out).group(1))


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = ref.make_corpus(bin_dir, work)
    failures = []
    spec = MODELS["llama-bf16-sharded"]
    weights = hf_weights(spec["config"], False, torch.bfloat16, seed=3)
    write_folder(os.path.join(work, "bf16"), spec, weights)
    write_folder(os.path.join(work, "f32"), dict(spec, config=dict(spec["config"], torch_dtype="float32")),
                 {k: v.float() for k, v in weights.items()})
    runs = {}
    for name in ("bf16", "f32"):
        plan = os.path.join(work, name + ".plan")
        output([f"{bin_dir}/mtc", os.path.join(work, name), *SHAPE, *LORA, "-o", plan])
        tensors = output([f"{bin_dir}/mtdump", plan, "--tensors"])
        out = output([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "3", "--lr", "1e-2", "--log",
                      os.path.join(work, name + ".jsonl"), "--export-hf", os.path.join(work, name + "-hf")])
        with open(os.path.join(work, name + ".jsonl")) as f:
            losses = [json.loads(line)["loss"] for line in f]
        runs[name] = dict(bf16_only=tensors.count("(bf16 only: its STAGING)"), residuals=tensors.count(".residual"),
                          bytes=host_bytes(out), losses=losses,
                          hf=read_hf_safetensors(os.path.join(work, name + "-hf", "model.safetensors")))
    b, f = runs["bf16"], runs["f32"]
    # 2 layers x 7 projections and their 2 norms, the embedding, the final norm and the head: 21
    # frozen 2-D and 1-D tensors from BF16, all held as bf16 alone; the F32 folder's split.
    if b["bf16_only"] != 21 or b["residuals"] != 28 or f["bf16_only"] != 0 or f["residuals"] != 49:
        failures.append(f"bf16 alone on {b['bf16_only']} frozen tensors (want 21), residuals {b['residuals']} "
                        f"(want 28, the adapters'); the F32 folder's plan: {f['bf16_only']} and {f['residuals']}")
    if b["losses"] != f["losses"] or set(b["hf"]) != set(f["hf"]) or \
            any(not torch.equal(b["hf"][k], f["hf"][k]) for k in b["hf"]):
        failures.append(f"the BF16 and F32 folders' runs differ: losses {b['losses']} and {f['losses']}")
    exported = b["hf"]["model.layers.1.mlp.down_proj.weight"]  # merged with its adapters
    frozen_export = b["hf"]["model.norm.weight"]
    if not torch.equal(frozen_export, weights["model.norm.weight"].float()):
        failures.append("--export-hf of a frozen bf16-only tensor: not the folder's values")
    if not b["bytes"] <= f["bytes"] - 1.5:  # 2 bytes less on the ~89 % of parameters frozen
        failures.append(f"host bytes per parameter: {b['bytes']} from BF16, {f['bytes']} from F32")
    print(f"bf16 alone: {b['bf16_only']} frozen tensors, {b['bytes']} host bytes/param against {f['bytes']} from the "
          f"F32 folder; losses {b['losses'][-1]:.6f} both, bit for bit; --export-hf the same folder "
          f"({len(b['hf'])} tensors, {tuple(exported.shape)} merged)")
    # 2 ranks share one host copy of the masters, the bf16-only staging copies among them: the
    # weights of --accumulate 2.
    plan = os.path.join(work, "bf16.plan")
    acc, ranks = os.path.join(work, "acc.safetensors"), os.path.join(work, "ranks.safetensors")
    output([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "3", "--accumulate", "2", "--export", acc])
    ran, why = ref.two_ranks([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "3", "--export", ranks])
    if ran is None:
        failures.append(f"2 ranks: {why}")
    else:
        a, r = ref.read_safetensors(acc), ref.read_safetensors(ranks)
        if set(a) != set(r) or any(not torch.equal(a[k], r[k]) for k in a):
            failures.append("2 ranks with bf16-only frozen weights: not the weights of --accumulate 2")
        print("2 ranks: the weights of --accumulate 2, bit for bit")
    # A checkpoint of the bf16-only weights (saved widened, read back through the check) at step 2
    # resumes to the weights of the run straight through at step 4 (a constant learning rate: a
    # 2-step run's cosine would differ from a 4-step run's).
    straight, resumed, ck = (os.path.join(work, n) for n in ("straight.safetensors", "resumed.safetensors", "ck"))
    shutil.rmtree(ck, ignore_errors=True)
    common = [f"{bin_dir}/mtrun", plan, "--data", data, "--min-lr-ratio", "1"]
    output(common + ["--steps", "4", "--export", straight])
    output(common + ["--steps", "2", "--checkpoint-dir", ck, "--checkpoint-every", "2"])
    output(common + ["--steps", "4", "--resume", ck, "--export", resumed])
    s, r = ref.read_safetensors(straight), ref.read_safetensors(resumed)
    if set(s) != set(r) or any(not torch.equal(s[k], r[k]) for k in s):
        failures.append("a checkpoint of bf16-only frozen weights: resumed, not the weights of the run straight through")
    print("checkpoint: resumed to the weights of the run straight through, bit for bit")
    # Frozen values that are not bf16 (another file than the folder's): refused by name.
    start = ref.read_safetensors(os.path.join(work, "f32.safetensors"))
    start["norm.weight"][5] += 1e-4
    ref.write_safetensors(os.path.join(work, "off.safetensors"), start)
    r = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "bf16.plan"), "--data", data, "--steps", "1",
                        "--weights", os.path.join(work, "off.safetensors")], capture_output=True, text=True)
    want = "'norm.weight' holds a value that is not bf16 at element 5"
    if r.returncode == 0 or want not in r.stderr or "--frozen-fp32" not in r.stderr:
        failures.append(f"mtrun --weights with a frozen value off bf16: exit {r.returncode}, want {want!r}: "
                        f"{r.stderr.strip()[:300]}")
    # mtc --frozen-fp32: the fp32 masters kept (no weight bf16 alone), which take those weights.
    fp32_plan = os.path.join(work, "fp32-masters.plan")
    output([f"{bin_dir}/mtc", os.path.join(work, "bf16"), *SHAPE, *LORA, "--frozen-fp32", "-o", fp32_plan])
    kept = output([f"{bin_dir}/mtdump", fp32_plan, "--tensors"]).count("(bf16 only: its STAGING)")
    output([f"{bin_dir}/mtrun", fp32_plan, "--data", data, "--steps", "1", "--weights",
            os.path.join(work, "off.safetensors")])
    if kept:
        failures.append(f"mtc --frozen-fp32: {kept} frozen weights still bf16 alone")
    print("an off-bf16 frozen value refused by name; --frozen-fp32's plan takes it")
    ref.finish("frozen_bf16", failures)


if __name__ == "__main__":
    main()
