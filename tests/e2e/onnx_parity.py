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
nothing) or train-dropout (nn.Dropout(0.1): the PyTorch twin draws mt.dropout's masks, so the
losses and weights compare as without dropout; recomputed blocks redraw the same masks).
"""
import json
import os
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import mt_reference as ref  # noqa: E402
import onnx_export  # noqa: E402
from same_tensors import differences  # noqa: E402

torch.set_num_threads(2)

LOSS_TOL, WEIGHT_TOL = 1e-4, 1e-5
BATCH, SEQ = 4, 32
DROPOUT = 0.1
SCHEDULE = ref.Schedule(steps=20, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)


def check_validation_does_not_drop(bin_dir, work, family, opset, plan, weights, data, failures):
    """Validation evaluates (dropout off, as torch's eval()): at the same weights (lr 0) the
    dropping plan's validation loss is the p = 0 export's, bit for bit, and its training loss is not."""
    undropped_model, undropped_plan = os.path.join(work, "p0.onnx"), os.path.join(work, "p0.plan")
    ref.run(["/usr/bin/python3", onnx_export.__file__, family, undropped_model, "--opset", opset, "--mode", "train",
             "--batch", str(BATCH), "--seq", str(SEQ), "--dropout", "0"])
    ref.run([f"{bin_dir}/mtc", undropped_model, "-o", undropped_plan, "--weights", os.path.join(work, "p0.safetensors")])
    losses = {}
    for name, p in (("dropping", plan), ("p = 0", undropped_plan)):
        log = os.path.join(work, "validation.jsonl")
        ref.run([f"{bin_dir}/mtrun", p, "--data", data, "--weights", weights, "--steps", "1", "--lr", "0",
                 "--val-fraction", "0.2", "--val-every", "1", "--log", log])
        records = [json.loads(line) for line in open(log)]
        losses[name] = (next(r["loss"] for r in records if "loss" in r), next(r["val_loss"] for r in records
                                                                             if "val_loss" in r))
    if losses["dropping"][1] != losses["p = 0"][1]:
        failures.append(f"validation dropped: its loss {losses['dropping'][1]} differs from the p = 0 plan's "
                        f"{losses['p = 0'][1]} at the same weights")
    if losses["dropping"][0] == losses["p = 0"][0]:
        failures.append("a training step of the dropping plan has the p = 0 plan's loss: nothing was dropped")


def check_resume_redraws_the_masks(bin_dir, work, plan, weights, data, mt_losses, failures):
    """A run resumed from its step-10 checkpoint draws the masks the uninterrupted run drew."""
    checkpoints, log = os.path.join(work, "checkpoints"), os.path.join(work, "resumed.jsonl")
    shutil.rmtree(checkpoints, ignore_errors=True)
    common = [f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--print-every", "100"]
    ref.run(common + ["--checkpoint-dir", checkpoints, "--checkpoint-every", "10"] + SCHEDULE.mtrun_flags())
    os.remove(os.path.join(checkpoints, f"step-{SCHEDULE.steps:09d}.ckpt.safetensors"))
    if os.path.exists(log):
        os.remove(log)
    ref.run(common + ["--resume", checkpoints, "--log", log] + SCHEDULE.mtrun_flags())
    resumed = [json.loads(line)["loss"] for line in open(log)]
    if resumed != mt_losses[10:]:
        failures.append(f"resumed at step 10, the losses differ from the uninterrupted run's: {resumed} vs "
                        f"{mt_losses[10:]}")


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
        {"": [], "loss": ["--with-loss"], "external": ["--external"], "dropout0": ["--dropout", "0"],
         "dropout": ["--dropout", str(DROPOUT)]}[variant])
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
    model = onnx_export.LM(family, 2, 64, 4, kv or 4, 256, gelu=gelu,
                           dropout={"dropout0": 0.0, "dropout": DROPOUT}.get(variant))
    model.load_state_dict(torch.load(state))
    params = dict(model.named_parameters())  # tied weights appear once, as in the export
    drops = ref.Dropout(SCHEDULE.seed)  # mt.dropout's masks in place of torch's
    drops.install(model)
    runs = iter(range(SCHEDULE.steps))

    def logits_of(tokens):
        drops.begin_run(next(runs))  # step - 1: one plan run per step
        return model(tokens)

    failures = []
    if variant == "dropout":  # the masks matter: without them the first step's logits differ
        x, _ = ref.batch(ref.read_tokens(data), 0, BATCH, SEQ, SCHEDULE.seed)
        with torch.no_grad():
            undropped = model.eval()(x)
            drops.begin_run(0)
            dropped = model.train()(x)
        change = ref.rel_err(dropped, undropped)
        if not change > 0.05:
            failures.append(f"dropout {DROPOUT} changes the first logits by only {change:.2e} (relative): masks "
                            "not applied?")
        if drops.sites != 6:
            failures.append(f"the twin applied {drops.sites} dropouts per forward, the export has 6")
    zero_grad = set()  # analytically zero gradients (attention's key bias): float noise on both sides

    def find_zero_gradients(step):
        if step == 1:
            norm = sum(float(p.grad.norm()) ** 2 for p in params.values()) ** 0.5
            zero_grad.update(n for n, p in params.items() if float(p.grad.norm()) <= 1e-7 * norm)

    torch_losses = ref.torch_train(params, logits_of, ref.read_tokens(data), SCHEDULE,
                                   after_backward=find_zero_gradients)

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
    if variant == "dropout":
        check_validation_does_not_drop(bin_dir, work, family, opset, plan, weights, data, failures)
        check_resume_redraws_the_masks(bin_dir, work, plan, weights, data, mt_losses, failures)
    if variant == "dropout" and f"dropout        p = {DROPOUT} at 6 sites" not in summary:
        failures.append("mtc's summary does not list the 6 dropout sites:\n" + summary)
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
    print("streamed-recompute: " + next(line.strip() for line in summary.splitlines() if "per step" in line))
    print(f"losses: {SCHEDULE.steps} steps, first {torch_losses[0]:.4f} last {torch_losses[-1]:.4f}, worst relative "
          f"difference {worst_loss:.3e}; final weights: {compared} tensors, worst relative error {worst_w:.3e} "
          f"({worst_name}); left out, zero gradient: {sorted(zero_grad)}")
    ref.finish(f"onnx {family} opset {opset} {mode} {variant}", failures)


if __name__ == "__main__":
    main()
