"""ONNX import end to end against PyTorch: a plain-torch model (models/onnx_export.py) exported
to ONNX, compiled by mtc and trained by mtrun must give PyTorch's loss curve (20 steps, each
within 1e-4 relative) and final weights (within 1e-5 relative, read back by torch from the
safetensors mtrun exports) from the same initial weights and batches. And the memory-centric
passes take imports like built-in models: the same ONNX model compiled streamed-recompute (layer
blocks found from the exporter's /blocks.N/ node names) trains to bit-identical losses and weights.
And the weights go back: mtonnx writes the trained weights into the ONNX model, which passes
ONNX's checker and, imported again, starts from exactly the trained weights.

usage: /usr/bin/python3 tests/e2e/onnx_parity.py BIN_DIR WORK_DIR FAMILY OPSET MODE [mtc flags...]
MODE: train or eval (the export mode), or train-loss (a training export whose graph takes the
targets and computes its own SoftmaxCrossEntropyLoss) or train-external (initializers in an
external-data file) or train-dropout0 (nanoGPT's nn.Dropout(0.0) modules: Dropout nodes that drop
nothing; and the same model with p = 0.1 refused by name, since mtc does not drop at random yet).
"""
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import mt_reference as ref  # noqa: E402
import onnx_export  # noqa: E402
from same_tensors import differences  # noqa: E402

torch.set_num_threads(2)

LOSS_TOL, WEIGHT_TOL = 1e-4, 1e-5
BATCH, SEQ = 4, 32
SCHEDULE = ref.Schedule(steps=20, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)


def main():
    bin_dir, work, family, opset, mode = sys.argv[1:6]
    extra = sys.argv[6:]
    os.makedirs(work, exist_ok=True)
    model_path, state = os.path.join(work, "model.onnx"), os.path.join(work, "init.pt")
    plan, weights = os.path.join(work, "model.plan"), os.path.join(work, "model.safetensors")
    data = ref.make_corpus(bin_dir, work)
    variant = mode.split("-")[1] if "-" in mode else ""
    mode = mode.split("-")[0]
    gelu = "tanh" if opset == "14" else "exact"  # both GELUs, each recognised by mt-fuse
    ref.run(["/usr/bin/python3", onnx_export.__file__, family, model_path, "--opset", opset, "--mode", mode,
         "--batch", str(BATCH), "--seq", str(SEQ), "--state", state, "--gelu", gelu] +
        {"": [], "loss": ["--with-loss"], "external": ["--external"], "dropout0": ["--dropout", "0"]}[variant])
    ref.run([f"{bin_dir}/mtc", model_path, "-o", plan] + extra)
    log, final = os.path.join(work, "log.jsonl"), os.path.join(work, "final.safetensors")
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--log", log, "--export", final,
         "--print-every", "10"] + SCHEDULE.mtrun_flags())
    mt_losses = [json.loads(line)["loss"] for line in open(log)]
    # The loss wrapper holds the model as `lm`: its parameters export as "lm.<name>".
    unwrap = lambda tensors: {(k[3:] if variant == "loss" and k.startswith("lm.") else k): v  # noqa: E731
                              for k, v in tensors.items()}
    mt_final = unwrap(ref.read_safetensors(final))
    streamed_plan, streamed_log, streamed_final = (os.path.join(work, n) for n in
                                                   ("streamed.plan", "streamed.jsonl", "streamed.safetensors"))
    summary = subprocess.run([f"{bin_dir}/mtc", model_path, "-o", streamed_plan, "--schedule", "streamed-recompute",
                              "--weights", os.path.join(work, "unused.safetensors")] + extra,
                             check=True, capture_output=True, text=True).stdout
    ref.run([f"{bin_dir}/mtrun", streamed_plan, "--data", data, "--weights", weights, "--log", streamed_log,
         "--export", streamed_final, "--print-every", "100"] + SCHEDULE.mtrun_flags())

    kv = None if family == "gpt2" else 2
    model = onnx_export.LM(family, 2, 64, 4, kv or 4, 256, gelu=gelu)
    model.load_state_dict(torch.load(state))
    params = dict(model.named_parameters())  # tied weights appear once, as in the export
    zero_grad = set()  # analytically zero gradients (attention's key bias): float noise on both sides

    def find_zero_gradients(step):
        if step == 1:
            norm = sum(float(p.grad.norm()) ** 2 for p in params.values()) ** 0.5
            zero_grad.update(n for n, p in params.items() if float(p.grad.norm()) <= 1e-7 * norm)

    torch_losses = ref.torch_train(params, model, ref.read_tokens(data), SCHEDULE, after_backward=find_zero_gradients)

    # The trained model in its own directory: with external data it must not lean on the input's.
    trained_dir = os.path.join(work, "trained")
    os.makedirs(trained_dir, exist_ok=True)
    trained_onnx = os.path.join(trained_dir, "trained.onnx")
    ref.run([f"{bin_dir}/mtonnx", model_path, final, "-o", trained_onnx])
    import onnx
    onnx.checker.check_model(onnx.load(trained_onnx))  # loads external data from beside it
    ref.run([f"{bin_dir}/mtc", trained_onnx, "-o", os.path.join(work, "reimport.plan"),
         "--weights", os.path.join(work, "reimport.safetensors")] + extra)
    reimported = unwrap(ref.read_safetensors(os.path.join(work, "reimport.safetensors")))

    failures = []
    if variant == "external" and not os.path.exists(trained_onnx + ".data"):
        failures.append("mtonnx wrote no external data for a model that came with external data")
    # The decomposed layers run as the fused kernels built-in models use.
    fused_ir = subprocess.run([f"{bin_dir}/mtc", model_path, "--emit=fuse"] + extra, check=True,
                              capture_output=True, text=True).stdout
    for op in (["mt.layernorm", "mt.gelu"] if family == "gpt2" else ["mt.rmsnorm", "mt.swiglu"]):
        if op not in fused_ir:
            failures.append(f"no {op} after mt-fuse: the exporter's decomposition was not recognised")
    # Attention runs fused (no (B, H, T, T) scores materialised), grouped-query for Llama.
    attention = "num_kv_heads = 2" if family == "llama" else "mt.attention"
    if fused_ir.count("mt.attention ") != 2 or attention not in fused_ir or "mt.softmax " in fused_ir:
        failures.append(f"attention was not fused into mt.attention (one per layer, {attention}) after mt-fuse")
    if family == "llama" and (fused_ir.count("mt.rope ") != 4 or "mt.concat " in fused_ir or "mt.transpose " in fused_ir):
        failures.append("RoPE was not fused into mt.rope (q and k of each layer, no transposes left) after mt-fuse")
    # Every kernel of the imported plan has a CUDA twin: it runs on the GPU backend too.
    header = subprocess.run([f"{bin_dir}/mtdump", plan, "--schedule"], check=True, capture_output=True,
                            text=True).stdout
    if "backends cpu, cuda" not in header:
        failures.append("the imported plan does not run on the CUDA backend: " +
                        next((l for l in header.splitlines() if "backends" in l), "no backends line"))
    if sorted(reimported) != sorted(mt_final):
        failures.append(f"re-imported parameters {sorted(reimported)} differ from the trained {sorted(mt_final)}")
    for name, value in mt_final.items():
        if name in reimported and not torch.equal(reimported[name], value):
            failures.append(f"re-imported {name} differs from the trained weights")
    if "forward runs twice" not in summary:
        failures.append("the streamed-recompute plan does not recompute blocks:\n" + summary)
    if [json.loads(line)["loss"] for line in open(streamed_log)] != mt_losses:
        failures.append("streamed-recompute losses differ from the resident plan's")
    if differences(streamed_final, final):  # names and metadata too, the plans' provenance aside
        failures.append("streamed-recompute weights differ from the resident plan's: " +
                        "; ".join(differences(streamed_final, final)))
    worst_loss = ref.compare_losses(mt_losses, torch_losses, LOSS_TOL, failures)
    state_now = model.state_dict()
    missing = [n for n in params if n not in mt_final]
    if missing and mode == "train":
        failures.append(f"parameters missing from mtrun's export (the ONNX names must survive): {missing}")
    # AdamW turns noise-sized gradients into lr-sized steps: those weights are left out.
    worst_w, worst_name, compared = 0.0, "", 0
    for name, value in mt_final.items():
        if name in state_now and name not in zero_grad:
            err = ref.rel_err(value, state_now[name])
            if err > worst_w:
                worst_w, worst_name = err, name
            compared += 1
    # An eval export folds the position table into its first SEQ rows, which has no PyTorch name.
    expected = len(params) - len(zero_grad) - (1 if mode == "eval" and family == "gpt2" else 0)
    if compared != expected:
        failures.append(f"compared {compared} weights, expected {expected} of the model's {len(params)} "
                        f"({len(zero_grad)} with zero gradient)")
    if not worst_w <= WEIGHT_TOL:
        failures.append(f"final weights differ: worst relative error {worst_w:.3e} > {WEIGHT_TOL}")
    print("streamed-recompute: " + summary.splitlines()[3].strip())
    print(f"losses: {SCHEDULE.steps} steps, first {torch_losses[0]:.4f} last {torch_losses[-1]:.4f}, worst relative "
          f"difference {worst_loss:.3e}; final weights: {compared} tensors, worst relative error {worst_w:.3e} "
          f"({worst_name}); left out, zero gradient: {sorted(zero_grad)}")
    if variant == "dropout0":  # the same model dropping at random is refused by name
        dropping = os.path.join(work, "dropout.onnx")
        ref.run(["/usr/bin/python3", onnx_export.__file__, family, dropping, "--opset", opset, "--mode", "train",
                 "--batch", str(BATCH), "--seq", str(SEQ), "--dropout", "0.1"])
        out = subprocess.run([f"{bin_dir}/mtc", dropping, "-o", os.path.join(work, "dropout.plan")],
                             capture_output=True, text=True)
        if out.returncode != 1 or "Dropout with ratio 0.1 in training mode" not in out.stderr:
            failures.append(f"a training export dropping at random: exit {out.returncode}, {out.stderr!r}")
    ref.finish(f"onnx {family} opset {opset} {mode} {variant}", failures)


if __name__ == "__main__":
    main()
