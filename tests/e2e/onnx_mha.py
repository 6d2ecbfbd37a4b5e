"""An eval export of torch's own nn.MultiheadAttention (models/onnx_export.py mha), as issue #19
found it: the export folds the causal mask into an anonymous initializer of 0/-inf, which must
stay a constant (it was trained as a weight, the loss drifting from PyTorch's); its attention is
not the pattern mtc fuses, which the summary must say; Linear weights come transposed under
anonymous names, which the summary must list. Then 40 steps against PyTorch training the module
itself from the same weights on the same batches: losses within 1e-5 relative, every parameter
within 1e-5 (the key bias, whose gradient is analytically zero, left out), and mtonnx writes the
trained weights back with the mask untouched.

usage: /usr/bin/python3 tests/e2e/onnx_mha.py BIN_DIR WORK_DIR
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

torch.set_num_threads(2)

TOL = 1e-5
BATCH, SEQ, LAYERS, WIDTH, HEADS, VOCAB = 4, 32, 2, 64, 4, 256
SCHEDULE = ref.Schedule(steps=40, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)
# The names mtc gives the parameters whose initializers the eval export left anonymous (named
# from the node using them), and the module's own: the summary lists them, the test maps them.
PATH_NAMES = {"Add.1": "wpe.weight", "head.weight": "head.weight",
              **{f"blocks.{i}.attn.weight": f"blocks.{i}.attn.in_proj_weight" for i in range(LAYERS)},
              **{f"blocks.{i}.mlp.{j}.weight": f"blocks.{i}.mlp.{j}.weight" for i in range(LAYERS) for j in (0, 2)}}


def initializer(model_path, name):
    import onnx
    from onnx import numpy_helper
    for t in onnx.load(model_path).graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    return None


def main():
    bin_dir, work = sys.argv[1:3]
    ref.fresh_work_dir(work)
    model_path, state = os.path.join(work, "mha.onnx"), os.path.join(work, "init.pt")
    plan, weights = os.path.join(work, "mha.plan"), os.path.join(work, "mha.safetensors")
    data = ref.make_corpus(bin_dir, work)
    ref.run(["/usr/bin/python3", onnx_export.__file__, "mha", model_path, "--mode", "eval", "--batch", str(BATCH),
             "--seq", str(SEQ), "--layers", str(LAYERS), "--width", str(WIDTH), "--heads", str(HEADS),
             "--vocab", str(VOCAB), "--state", state])
    summary = subprocess.run([f"{bin_dir}/mtc", model_path, "-o", plan, "--weights", weights], check=True,
                             capture_output=True, text=True).stdout
    print(summary)
    failures = []
    kept = next((line for line in summary.splitlines() if "kept out of training" in line), "")
    mask_name = kept.split(": ", 1)[1].split(" (")[0] if "holds Inf or NaN" in kept else None
    if mask_name is None:
        failures.append("the summary does not say the mask initializer is kept constant:\n" + summary)
    if f"attention      {LAYERS} not fused into mt.attention" not in summary:
        failures.append("the summary does not name the unfused attention of each layer")
    for name in PATH_NAMES:
        if name + " (from onnx::" not in summary:
            failures.append(f"the summary does not list {name} among the names made from node paths")

    log, final = os.path.join(work, "log.jsonl"), os.path.join(work, "final.safetensors")
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--log", log, "--export", final,
             "--print-every", "20"] + SCHEDULE.mtrun_flags())
    mt_losses = [json.loads(line)["loss"] for line in open(log)]
    mt_final = ref.read_safetensors(final)

    model = onnx_export.MhaLM(LAYERS, WIDTH, HEADS, VOCAB, SEQ)
    model.load_state_dict(torch.load(state))
    params = dict(model.named_parameters())
    torch_losses = ref.torch_train(params, model, ref.read_tokens(data), SCHEDULE)
    worst_loss = ref.compare_losses(mt_losses, torch_losses, TOL, failures)

    # Every parameter, by its own name or the module's; the key bias's gradient is zero
    # analytically (softmax is shift-invariant): AdamW turns its float noise into lr-sized steps.
    trained = model.state_dict()
    worst, worst_name, compared = 0.0, "", set()
    for name, value in mt_final.items():
        torch_name = PATH_NAMES.get(name, name)
        if torch_name not in trained:
            failures.append(f"mtrun exported {name}, which maps to no parameter of the module")
            continue
        want = trained[torch_name]
        if torch_name.endswith("attn.in_proj_bias"):  # (q, k, v) biases: leave out k's
            value, want = torch.cat([value[:WIDTH], value[2 * WIDTH:]]), torch.cat([want[:WIDTH], want[2 * WIDTH:]])
        err = ref.rel_err(value, want)
        if err > worst:
            worst, worst_name = err, torch_name
        compared.add(torch_name)
    if sorted(compared) != sorted(params):
        failures.append(f"compared {sorted(compared)}, the module has {sorted(params)}")
    if not worst <= TOL:
        failures.append(f"final weights differ: worst relative error {worst:.3e} ({worst_name}) > {TOL}")

    # The trained weights go back into the ONNX file; the mask is what it was.
    trained_onnx = os.path.join(work, "trained.onnx")
    ref.run([f"{bin_dir}/mtonnx", model_path, final, "-o", trained_onnx])
    if mask_name is not None:
        before, after = initializer(model_path, mask_name), initializer(trained_onnx, mask_name)
        if before is None or after is None or not (before == after).all():
            failures.append(f"the mask initializer {mask_name} changed in the trained model")
    print(f"losses: {SCHEDULE.steps} steps, first {torch_losses[0]:.4f} last {torch_losses[-1]:.4f}, worst relative "
          f"difference {worst_loss:.3e}; weights: {len(compared)} tensors, worst relative error {worst:.3e} "
          f"({worst_name}); mask {mask_name} kept")
    ref.finish("onnx nn.MultiheadAttention eval export", failures)


if __name__ == "__main__":
    main()
