"""Training part of a Hugging Face folder (tests/e2e/hf_import.py's folders): --trainable by the
folder's tensor names (q_proj and v_proj train alone, the rest exported as read), and --lora: the
adapters train, --export-hf merges them into the weights (W + alpha / r B A, and the merged folder
scores the data as the adapted model), --export-peft writes PEFT's adapter folder, with the
modules trained whole beside the adapters (modules_to_save), rank-stabilised scaling and dropout.

usage: /usr/bin/python3 tests/e2e/hf_peft.py BIN_DIR WORK_DIR
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from hf_import import MODELS, SCHEDULE, hf_layout, hf_name_of, hf_weights, read_hf_safetensors, write_folder  # noqa: E402

torch.set_num_threads(2)


def check_trainable_by_hf_names(bin_dir, work, data, failures):
    """mtc --trainable matches a folder's tensor names: PEFT's usual targets (q_proj, v_proj) train
    alone, the only gradients dumped; the export gives back every other tensor as it was read."""
    name, pattern = "llama-bf16-sharded", r"self_attn\.(q|v)_proj"
    spec, folder = MODELS[name], os.path.join(work, name)
    plan, grads, out = (os.path.join(work, name + suffix) for suffix in (".qv.plan", ".qv.grads.safetensors", ".qv-out"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             "--trainable", pattern])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "2", "--dump-grads", grads, "--export-hf", out])
    given = {}
    for shard in sorted(f for f in os.listdir(folder) if f.endswith(".safetensors")):
        given.update(read_hf_safetensors(os.path.join(folder, shard)))
    exported = read_hf_safetensors(os.path.join(out, "model.safetensors"))
    dumped = set(hf_layout(ref.read_safetensors(grads), spec))
    trained = {k for k in given if re.search(pattern, k)}
    changed = {k for k in given if not torch.equal(exported[k], given[k].float())}
    if dumped != trained or changed != trained or len(trained) != 4:
        failures.append(f"--trainable '{pattern}': gradients of {sorted(dumped)}, changed {sorted(changed)}, "
                        f"want {sorted(trained)}")
    print(f"--trainable '{pattern}': {len(trained)} of {len(given)} tensors trained, the rest exported as read")


def eval_loss(bin_dir, plan, data, *flags):
    """mtrun --eval-only's loss of `plan` on all of `data`, as logged."""
    log = plan + ".eval.jsonl"
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--eval-only", "--log", log, *flags])
    with open(log) as f:
        return [json.loads(line)["val_loss"] for line in f if "val_loss" in line][0]


def check_lora_merge(bin_dir, work, data, failures):
    """mtc --lora on a folder, its targets by the folder's names: the adapters train, the rest is
    exported as read, and --export-hf merges them in: q_proj and v_proj are W + alpha / r B A
    (within fp32 rounding of PyTorch's product), and the merged folder, compiled again, scores the
    data as the adapted model does. --export-peft writes the adapters under PEFT's keys with its
    config (q_proj and v_proj of every layer: target_modules their names)."""
    name = "llama-bf16-sharded"
    folder = os.path.join(work, name)
    plan, trained, out, merged_plan, peft = (os.path.join(work, name + s) for s in
                                             (".lora.plan", ".lora.trained.safetensors", ".lora-out", ".merged.plan",
                                              ".peft"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             "--lora", "4", "--lora-alpha", "8", "--lora-targets", r"(q|v)_proj"])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "5", "--lr", "1e-2", "--export", trained,
             "--export-hf", out, "--export-peft", peft])
    ours = ref.read_safetensors(trained)
    given = {}
    for shard in sorted(f for f in os.listdir(folder) if f.endswith(".safetensors")):
        given.update(read_hf_safetensors(os.path.join(folder, shard)))
    exported = read_hf_safetensors(os.path.join(out, "model.safetensors"))
    worst, adapted = 0.0, 0
    to_ours = {hf_name_of(k): k for k in ours if "lora_" not in k}
    for hf, tensor in given.items():
        ours_name = to_ours[hf]
        a = ours_name[:-len(".weight")] + ".lora_A.weight"
        if a in ours:
            adapted += 1
            want = tensor.float() + 2.0 * (ours[ours_name[:-len(".weight")] + ".lora_B.weight"] @ ours[a])
            worst = max(worst, ref.rel_err(exported[hf], want))
        elif not torch.equal(exported[hf], tensor.float()):
            failures.append(f"--lora: {hf} changed, but it has no adapters")
    if adapted != 4 or worst > 1e-6 or set(exported) != set(given):
        failures.append(f"--lora: {adapted} weights adapted (want 4), merged within {worst:.1e} of W + 2 B A, "
                        f"tensors {sorted(set(exported) ^ set(given))[:4]} on one side only")
    ref.run([f"{bin_dir}/mtc", out, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", merged_plan])
    adapted_loss = eval_loss(bin_dir, plan, data, "--weights", trained)
    merged_loss = eval_loss(bin_dir, merged_plan, data)
    if not abs(adapted_loss - merged_loss) <= 1e-5 * adapted_loss:
        failures.append(f"--lora: the merged folder scores {merged_loss}, the adapted model {adapted_loss}")
    print(f"--lora: 4 weights adapted, merged within {worst:.1e}; the merged folder scores {merged_loss:.6f}, the "
          f"adapted model {adapted_loss:.6f}")
    adapters = read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors"))
    with open(os.path.join(peft, "adapter_config.json")) as f:
        config = json.load(f)
    want = {f"base_model.model.{hf_name_of(k.replace('.lora_A', '').replace('.lora_B', ''))[:-len('.weight')]}."
            f"{k.split('.')[-2]}.weight": v for k, v in ours.items() if "lora_" in k}
    if set(adapters) != set(want) or any(not torch.equal(adapters[k], want[k]) for k in want):
        failures.append(f"--export-peft: keys {sorted(set(adapters) ^ set(want))[:4]} on one side only, or values "
                        f"that are not the trained adapters'")
    expected = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 8.0,
                "target_modules": ["q_proj", "v_proj"], "base_model_name_or_path": os.path.abspath(folder)}
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
    if wrong:
        failures.append(f"--export-peft: adapter_config.json has {wrong}, want {expected}")
    print(f"--export-peft: {len(adapters)} tensors under PEFT's keys, target_modules {config.get('target_modules')}")
    # Layer 0's q_proj alone: target_modules the exact module, a regular expression PEFT matches whole.
    part_plan, part = os.path.join(work, name + ".part.plan"), os.path.join(work, name + ".part-peft")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", part_plan,
             "--lora", "2", "--lora-targets", r"layers\.0\.self_attn\.q_proj"])
    ref.run([f"{bin_dir}/mtrun", part_plan, "--data", data, "--steps", "1", "--export-peft", part])
    with open(os.path.join(part, "adapter_config.json")) as f:
        targets = json.load(f)["target_modules"]
    if targets != r"model\.layers\.0\.self_attn\.q_proj":
        failures.append(f"--export-peft of layer 0's q_proj alone: target_modules {targets!r}")


def check_modules_to_save(bin_dir, work, data, failures):
    """--lora-rslora, --lora-dropout and --trainable beside the adapters on a folder: the adapter
    folder holds the trained final norm and head under their modules' names (PEFT's
    modules_to_save) and says use_rslora and lora_dropout; --export-hf merges at alpha / sqrt(r)."""
    name = "llama-bf16-sharded"
    folder = os.path.join(work, name)
    plan, trained, merged, peft = (os.path.join(work, name + s) for s in
                                   (".saved.plan", ".saved.safetensors", ".saved-hf", ".saved-peft"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             "--lora", "4", "--lora-alpha", "8", "--lora-rslora", "--lora-dropout", "0.05",
             "--trainable", r"model\.norm|lm_head"])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "3", "--lr", "1e-2", "--export", trained,
             "--export-hf", merged, "--export-peft", peft])
    ours = ref.read_safetensors(trained)
    adapters = read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors"))
    with open(os.path.join(peft, "adapter_config.json")) as f:
        config = json.load(f)
    expected = {"r": 4, "lora_alpha": 8.0, "use_rslora": True, "lora_dropout": 0.05,
                "modules_to_save": ["model.norm", "lm_head"], "target_modules": ["q_proj", "v_proj"]}
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
    if wrong:
        failures.append(f"--export-peft with --trainable: adapter_config.json has {wrong}, want {expected}")
    for plan_name, key in (("norm.weight", "base_model.model.model.norm.weight"),
                           ("lm_head.weight", "base_model.model.lm_head.weight")):
        if key not in adapters or not torch.equal(adapters[key], ours[plan_name]):
            failures.append(f"--export-peft with --trainable: {key} missing or not the trained {plan_name}")
    if len(adapters) != 10:
        failures.append(f"--export-peft with --trainable: {len(adapters)} tensors, want 8 adapters and 2 saved")
    exported = read_hf_safetensors(os.path.join(merged, "model.safetensors"))
    q = "layers.0.attn.q"
    want = ours[q + ".weight"] + 4.0 * (ours[q + ".lora_B.weight"] @ ours[q + ".lora_A.weight"])  # 8 / sqrt(4)
    err = ref.rel_err(exported[hf_name_of(q + ".weight")], want)
    if not err <= 1e-6 or not torch.equal(exported["model.norm.weight"], ours["norm.weight"]):
        failures.append(f"--lora-rslora: the merged q_proj is {err:.1e} from W + 4 B A, or the norm is not the trained")
    print(f"--export-peft with --trainable: modules_to_save {config.get('modules_to_save')}, use_rslora "
          f"{config.get('use_rslora')}; --export-hf merged at alpha / sqrt(r) within {err:.1e}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = ref.make_corpus(bin_dir, work)
    failures = []
    name = "llama-bf16-sharded"
    spec = MODELS[name]
    write_folder(os.path.join(work, name), spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    check_trainable_by_hf_names(bin_dir, work, data, failures)
    check_lora_merge(bin_dir, work, data, failures)
    check_modules_to_save(bin_dir, work, data, failures)
    ref.finish("hf_peft", failures)


if __name__ == "__main__":
    main()
