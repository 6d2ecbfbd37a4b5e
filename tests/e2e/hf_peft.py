"""Training part of a Hugging Face folder (tests/e2e/hf_folders.py's folders): --trainable by the
folder's tensor names (q_proj and v_proj train alone, the rest exported as read), and --lora: the
adapters train, --export-hf merges them into the weights (W + alpha / r B A, and the merged folder
scores the data as the adapted model), --export-peft writes PEFT's adapter folder, with the
modules trained whole beside the adapters (modules_to_save), rank-stabilised scaling and dropout;
mtc --lora-from puts such a folder back on the model, to train on or merged for sampling. DoRA
(--lora-dora) the same way: magnitudes from the folder's row norms, merged as PEFT merges DoRA,
exported and read back. Qwen2-MoE's all-linear, its shared experts adapted alone; GLM-4.5's,
DeepSeek-V3's and DeepSeek-V2's alike (PEFT's adapters of V2's router, never trained since its
forward reads the weight, read as the no-op they are). GraniteMoE's all-linear, its routers
adapted; its experts' stacks refused by --export-peft. Granite 4.0's and GLM-4's all-linear, their fused MLP
layer written as one adapter and read back.

usage: /usr/bin/python3 tests/e2e/hf_peft.py BIN_DIR WORK_DIR
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
from hf_folders import MODELS, hf_layout, hf_name_of, hf_weights, read_hf_safetensors, write_folder  # noqa: E402
from hf_import import SCHEDULE  # noqa: E402
from hf_twins import moe_layer  # noqa: E402

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
    # Layer 0's q_proj alone: target_modules its full name, which PEFT finds by equality.
    part_plan, part = os.path.join(work, name + ".part.plan"), os.path.join(work, name + ".part-peft")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", part_plan,
             "--lora", "2", "--lora-targets", r"layers\.0\.self_attn\.q_proj"])
    ref.run([f"{bin_dir}/mtrun", part_plan, "--data", data, "--steps", "1", "--export-peft", part])
    with open(os.path.join(part, "adapter_config.json")) as f:
        targets = json.load(f)["target_modules"]
    if targets != ["model.layers.0.self_attn.q_proj"]:
        failures.append(f"--export-peft of layer 0's q_proj alone: target_modules {targets!r}")


def train_and_export(bin_dir, folder, data, stem, steps, *flags):
    """mtc `folder` with `flags` into STEM.plan, `steps` of mtrun at lr 1e-2 with --export
    (STEM.safetensors), --export-hf (STEM-hf) and --export-peft (STEM-peft): those paths, the trained
    tensors, and the adapter folder's tensors and config."""
    plan, trained, merged, peft = stem + ".plan", stem + ".safetensors", stem + "-hf", stem + "-peft"
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             *flags])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", str(steps), "--lr", "1e-2", "--export", trained,
             "--export-hf", merged, "--export-peft", peft])
    with open(os.path.join(peft, "adapter_config.json")) as f:
        config = json.load(f)
    return (plan, trained, merged, peft, ref.read_safetensors(trained),
            read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors")), config)


def check_modules_to_save(bin_dir, work, data, failures):
    """--lora-rslora, --lora-dropout and --trainable beside the adapters on a folder: the adapter
    folder holds the trained final norm and head under their modules' names (PEFT's
    modules_to_save) and says use_rslora and lora_dropout; --export-hf merges at alpha / sqrt(r)."""
    name = "llama-bf16-sharded"
    folder = os.path.join(work, name)
    _, trained, merged, peft, ours, adapters, config = train_and_export(
        bin_dir, folder, data, os.path.join(work, name + ".saved"), 3, "--lora", "4", "--lora-alpha", "8",
        "--lora-rslora", "--lora-dropout", "0.05", "--trainable", r"model\.norm|lm_head")
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


def check_dora(bin_dir, work, data, failures):
    """--lora-dora on a folder: each magnitude starts at its weight's row norms (the folder's bf16
    widened); --export-hf merges as PEFT merges DoRA, m / ||W + s B A|| (rows) x (W + s B A), and
    the merged folder scores the data as the adapted model; --export-peft writes the magnitudes
    under PEFT's key (no ".weight") and use_dora; --lora-from reads that folder back to the bit,
    and merged (--forward-only) bit for bit as --export-hf merges."""
    name = "llama-bf16-sharded"
    folder = os.path.join(work, name)
    plan, trained, out, peft, merged_plan = (os.path.join(work, name + s) for s in
                                             (".dora.plan", ".dora.safetensors", ".dora-hf", ".dora-peft",
                                              ".dora-merged.plan"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             "--lora", "4", "--lora-alpha", "8", "--lora-dora", "--lora-targets", r"(q|v)_proj"])
    start = ref.read_safetensors(plan[:-5] + ".safetensors")
    magnitudes = sorted(k for k in start if k.endswith(".lora_magnitude_vector"))
    worst_start = max(ref.rel_err(start[m], torch.linalg.norm(start[m[:-len("lora_magnitude_vector")] + "weight"], dim=1))
                      for m in magnitudes)
    if len(magnitudes) != 4 or not worst_start <= 1e-6:
        failures.append(f"--lora-dora: {len(magnitudes)} magnitudes (want 4), {worst_start:.1e} from the row norms")
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "5", "--lr", "1e-2", "--export", trained,
             "--export-hf", out, "--export-peft", peft])
    ours = ref.read_safetensors(trained)
    exported = read_hf_safetensors(os.path.join(out, "model.safetensors"))
    worst = 0.0
    for m in magnitudes:
        stem = m[:-len(".lora_magnitude_vector")]
        if torch.equal(ours[m], start[m]):
            failures.append(f"--lora-dora: {m} did not train")
        merged = ours[stem + ".weight"] + 2.0 * (ours[stem + ".lora_B.weight"] @ ours[stem + ".lora_A.weight"])
        want = (ours[m] / torch.linalg.norm(merged, dim=1)).view(-1, 1) * merged  # PEFT's DoRA merge_safe
        worst = max(worst, ref.rel_err(exported[hf_name_of(stem + ".weight")], want))
    ref.run([f"{bin_dir}/mtc", out, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", merged_plan])
    adapted_loss = eval_loss(bin_dir, plan, data, "--weights", trained)
    merged_loss = eval_loss(bin_dir, merged_plan, data)
    if not worst <= 1e-6 or not abs(adapted_loss - merged_loss) <= 1e-5 * adapted_loss:
        failures.append(f"--lora-dora --export-hf: merged within {worst:.1e} of PEFT's DoRA merge; the merged folder "
                        f"scores {merged_loss}, the adapted model {adapted_loss}")
    adapters = read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors"))
    with open(os.path.join(peft, "adapter_config.json")) as f:
        config = json.load(f)
    keys = {f"base_model.model.{hf_name_of(m[:-len('lora_magnitude_vector')] + 'weight')[:-len('.weight')]}"
            ".lora_magnitude_vector": m for m in magnitudes}
    if config.get("use_dora") is not True or len(adapters) != 12 or \
            any(k not in adapters or not torch.equal(adapters[k], ours[m]) for k, m in keys.items()):
        failures.append(f"--lora-dora --export-peft: use_dora {config.get('use_dora')}, {len(adapters)} tensors "
                        f"(want 12), magnitudes {sorted(keys)[:2]} missing or not the trained")
    from_plan, gen, merged_gen = (os.path.join(work, name + s) for s in
                                  (".dora-from.plan", ".dora-gen.plan", ".dora-merged-gen.plan"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", from_plan,
             "--lora-from", peft])
    back = ref.read_safetensors(from_plan[:-5] + ".safetensors")
    from_loss = eval_loss(bin_dir, from_plan, data)
    if set(back) != set(ours) or any(not torch.equal(back[k], ours[k]) for k in ours) or from_loss != adapted_loss:
        failures.append(f"--lora-from a DoRA folder: not the trained weights to the bit, or it scores {from_loss}, "
                        f"the adapted model {adapted_loss}")
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq", "64", "-o", gen, "--lora-from", peft])
    ref.run([f"{bin_dir}/mtc", out, "--forward-only", "--batch", "1", "--seq", "64", "-o", merged_gen])
    if not same_weights(gen, merged_gen):
        failures.append("--forward-only --lora-from a DoRA folder: not --export-hf's merged weights bit for bit")
    print(f"--lora-dora: 4 magnitudes from the row norms (within {worst_start:.1e}), merged within {worst:.1e} of "
          f"PEFT's DoRA merge; the merged folder scores {merged_loss:.6f}, the adapted model {adapted_loss:.6f}; "
          f"--export-peft and --lora-from back to the bit")
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector"
    nan = adapters[key].clone()
    nan[3] = float("nan")
    for adapter, want in (
            (damaged_adapter(work, peft, "dora-off", {"use_dora": False}),
             "a DoRA magnitude, but the config's use_dora is off"),
            (damaged_adapter(work, peft, "dora-shape", extra={key: torch.ones(63)}), "needs [64]"),
            (damaged_adapter(work, peft, "dora-nan", extra={key: nan}), "holds nan at element"),
            (damaged_adapter(work, peft, "dora-missing", drop=key), "has no '" + key + "'")):
        lora_from_refused(bin_dir, work, adapter, want, failures)


# Every field of PEFT's LoraConfig (and PeftConfig's) that its save_pretrained writes, each at its
# default (off) or inert: --lora-from reads such a config as the plain one.
PEFT_LORA_CONFIG_FIELDS = {
    "auto_mapping": None, "peft_version": "0.17.1", "revision": None, "inference_mode": True,
    "exclude_modules": None, "fan_in_fan_out": False, "bias": "none", "use_rslora": False, "modules_to_save": None,
    "init_lora_weights": True, "layers_to_transform": None, "layers_pattern": None, "rank_pattern": {},
    "alpha_pattern": {}, "megatron_config": None, "megatron_core": "megatron.core", "trainable_token_indices": None,
    "loftq_config": {}, "eva_config": None, "corda_config": None, "lora_ga_config": None, "use_dora": False,
    "velora_config": None, "alora_invocation_tokens": None, "use_qalora": False, "qalora_group_size": 16,
    "monteclora_config": None, "layer_replication": None, "runtime_config": {"ephemeral_gpu_offload": False},
    "lora_bias": False, "target_parameters": None, "use_bdlora": None, "arrow_config": None, "kasa_config": None,
    "ensure_weight_tying": False}


def same_weights(plan_a, plan_b):
    """Whether the initial weights beside two plans hold the same tensors, bit for bit."""
    a, b = ref.read_safetensors(plan_a[:-5] + ".safetensors"), ref.read_safetensors(plan_b[:-5] + ".safetensors")
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def lora_from_refused(bin_dir, work, adapter, want, failures, model=None, flags=()):
    """mtc --lora-from `adapter` on the folder (or `model`) must fail naming `want` and write no plan."""
    plan = os.path.join(work, "refused.plan")
    for stale in (plan, plan[:-5] + ".safetensors"):
        if os.path.exists(stale):
            os.remove(stale)
    model = model or os.path.join(work, "llama-bf16-sharded")
    r = subprocess.run([f"{bin_dir}/mtc", model, "--batch", "4", "--seq", "32", "-o", plan, "--lora-from", adapter,
                        *flags], capture_output=True, text=True)
    if r.returncode == 0 or want not in r.stderr or os.path.exists(plan) or os.path.exists(plan[:-5] + ".safetensors"):
        failures.append(f"--lora-from {os.path.basename(adapter)} {' '.join(flags)}: exit {r.returncode}, want an "
                        f"error naming {want!r}: {r.stderr.strip()[:300]}")


def damaged_adapter(work, source, name, config_change=None, drop=None, extra=None):
    """A copy of adapter folder `source`: its config changed (a key set to None is removed), a
    tensor dropped or an extra one added."""
    folder = os.path.join(work, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with open(os.path.join(source, "adapter_config.json")) as f:
        config = json.load(f)
    for key, value in (config_change or {}).items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump(config, f)
    tensors = read_hf_safetensors(os.path.join(source, "adapter_model.safetensors"))
    tensors.pop(drop, None)
    tensors.update(extra or {})
    ref.write_safetensors(os.path.join(folder, "adapter_model.safetensors"), tensors)
    return folder


def check_lora_from(bin_dir, work, data, failures):
    """mtc --lora-from: the adapter folders --export-peft wrote go back onto the folder. A training
    plan starts from the trained adapters (and the saved modules), so it scores the data exactly as
    the plan that trained them; a forward-only plan has them merged into its weights, bit for bit
    --export-hf's merged folder. Then the refusals: PEFT features not implemented, keys not
    known, tensors missing or extra or misshapen, a model that is no folder, --lora beside it."""
    name = "llama-bf16-sharded"
    folder = os.path.join(work, name)
    peft, trained = os.path.join(work, name + ".peft"), os.path.join(work, name + ".lora.trained.safetensors")
    plan = os.path.join(work, name + ".from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan,
             "--lora-from", peft])
    start, ours = ref.read_safetensors(plan[:-5] + ".safetensors"), ref.read_safetensors(trained)
    if set(start) != set(ours) or any(not torch.equal(start[k], ours[k]) for k in ours):
        failures.append("--lora-from: the initial weights are not the trained adapters on the folder's weights")
    adapted_loss = eval_loss(bin_dir, os.path.join(work, name + ".lora.plan"), data, "--weights", trained)
    from_loss = eval_loss(bin_dir, plan, data)
    if from_loss != adapted_loss:
        failures.append(f"--lora-from: the plan scores {from_loss}, the plan that trained the adapters {adapted_loss}")
    # Forward-only: merged as --export-hf merges.
    gen, merged_gen = os.path.join(work, name + ".from-gen.plan"), os.path.join(work, name + ".merged-gen.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq", "64", "-o", gen, "--lora-from", peft])
    ref.run([f"{bin_dir}/mtc", os.path.join(work, name + ".lora-out"), "--forward-only", "--batch", "1", "--seq", "64",
             "-o", merged_gen])
    a, b = ref.read_safetensors(gen[:-5] + ".safetensors"), ref.read_safetensors(merged_gen[:-5] + ".safetensors")
    if set(a) != set(b) or any(not torch.equal(a[k], b[k]) for k in a):
        failures.append("--forward-only --lora-from: the merged weights differ from --export-hf's merged folder's")
    print(f"--lora-from: the trained adapters back on the folder score {from_loss:.6f} (the adapted model "
          f"{adapted_loss:.6f}); forward-only, merged bit for bit as --export-hf merges")
    # The saved modules, rsLoRA and dropout come back from their config.
    saved = os.path.join(work, name + ".saved-peft")
    summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o",
                              os.path.join(work, "saved-from.plan"), "--lora-from", saved],
                             capture_output=True, text=True)
    start, ours = (ref.read_safetensors(os.path.join(work, "saved-from.safetensors")),
                   ref.read_safetensors(os.path.join(work, name + ".saved.safetensors")))
    if "rank-stabilised: alpha / sqrt(r), dropout 0.05 before A" not in summary.stdout or \
            f"as {saved}/adapter_config.json says" not in summary.stdout or \
            not torch.equal(start["norm.weight"], ours["norm.weight"]) or \
            not torch.equal(start["lm_head.weight"], ours["lm_head.weight"]):
        failures.append(f"--lora-from with modules_to_save: {summary.stdout[-300:]}{summary.stderr}")
    # target_modules as PEFT's other form, an expression the whole module name must match: the
    # same adapters, the same initial weights; one a backtracking engine takes exponential time
    # over on a non-matching name ("(.*)*" before a tail) too.
    for tag, expression in (("regex", r"^.*\.(q_proj|v_proj)$"), ("nested", r"(.*)*\.(q|v)_proj")):
        regex_plan = os.path.join(work, tag + "-from.plan")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o",
                 regex_plan, "--lora-from", damaged_adapter(work, peft, tag, {"target_modules": expression})])
        if not same_weights(regex_plan, plan):
            failures.append(f"--lora-from with target_modules {expression!r}: not the weights of its list form")
    # A config as PEFT writes it: every field of its LoraConfig, each off or inert.
    full = damaged_adapter(work, peft, "full")
    with open(os.path.join(full, "adapter_config.json")) as f:
        config = json.load(f)
    config.update(PEFT_LORA_CONFIG_FIELDS)
    with open(os.path.join(full, "adapter_config.json"), "w") as f:
        json.dump(config, f)
    full_plan = os.path.join(work, "full-from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", full_plan,
             "--lora-from", full])
    if not same_weights(full_plan, plan):
        failures.append("--lora-from with every field of PEFT's LoraConfig: not the weights of the plain config's")
    # --export-peft's full module name (layer 0's q_proj alone) reads back to the same adapters.
    part_plan = os.path.join(work, "part-from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", part_plan,
             "--lora-from", os.path.join(work, name + ".part-peft")])
    part = ref.read_safetensors(part_plan[:-5] + ".safetensors")
    exported = read_hf_safetensors(os.path.join(work, name + ".part-peft", "adapter_model.safetensors"))
    if sorted(k for k in part if "lora_" in k) != ["layers.0.attn.q.lora_A.weight", "layers.0.attn.q.lora_B.weight"] or \
            not torch.equal(part["layers.0.attn.q.lora_A.weight"],
                            exported["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]):
        failures.append("--lora-from of one module's adapter folder: not layer 0's q_proj adapters as exported")
    # Forward-only with saved modules: the norm and the head replaced, q and v merged; a decode step too.
    gen_saved = os.path.join(work, "saved-gen.plan")
    for flags in ([], ["--kv-cache"]):
        ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq", "64", "-o", gen_saved,
                 "--lora-from", saved] + flags)
    gen_weights = ref.read_safetensors(gen_saved[:-5] + ".safetensors")
    if not torch.equal(gen_weights["norm.weight"], ours["norm.weight"]) or \
            not torch.equal(gen_weights["lm_head.weight"], ours["lm_head.weight"]):
        failures.append("--forward-only --lora-from with modules_to_save: the saved norm and head not in the weights")
    # A whole tensor saved beside the adapters (PEFT's save_embedding_layers) replaces the folder's.
    beside_plan = os.path.join(work, "beside-from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", beside_plan, "--lora-from",
             damaged_adapter(work, peft, "beside", extra={"base_model.model.model.norm.weight": torch.full((64,), 0.5)})])
    if not torch.equal(ref.read_safetensors(beside_plan[:-5] + ".safetensors")["norm.weight"], torch.full((64,), 0.5)):
        failures.append("--lora-from: a whole tensor beside the adapters did not replace the folder's")
    # An adapted module's own weight beside its adapters (PEFT's name: X.base_layer.weight) replaces
    # the folder's under the adapters.
    base_plan = os.path.join(work, "base-layer-from.plan")
    q_base = torch.full((64, 64), 0.125)
    ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", base_plan, "--lora-from",
             damaged_adapter(work, peft, "base-layer",
                             extra={"base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight": q_base})])
    if not torch.equal(ref.read_safetensors(base_plan[:-5] + ".safetensors")["layers.0.attn.q.weight"], q_base):
        failures.append("--lora-from: an adapted module's base_layer.weight did not replace the folder's weight")
    # A tied model: a saved embedding PEFT would untie (ensure_weight_tying off) is refused.
    tied_plan, tied_folder = os.path.join(work, "tied.plan"), os.path.join(work, "tied-hf")
    ref.run([f"{bin_dir}/mtc", "llama-tiny", "--tied", "--batch", "4", "--seq", "32", "-o", tied_plan])
    ref.run([f"{bin_dir}/mtrun", tied_plan, "--data", data, "--steps", "1", "--export-hf", tied_folder])
    lora_from_refused(bin_dir, work, damaged_adapter(work, peft, "tied-embedding", {"modules_to_save": ["embed_tokens"]},
                                                     extra={"base_model.model.model.embed_tokens.weight":
                                                            torch.zeros(256, 64)}),
                      "without ensure_weight_tying", failures, model=tied_folder)
    # With ensure_weight_tying, PEFT keeps them tied and writes the head as the embedding's copy.
    table = torch.full((256, 64), 0.25)
    tied_from = os.path.join(work, "tied-from.plan")
    ref.run([f"{bin_dir}/mtc", tied_folder, "--batch", "4", "--seq", "32", "-o", tied_from, "--lora-from",
             damaged_adapter(work, peft, "tied-kept", {"modules_to_save": ["embed_tokens"], "ensure_weight_tying": True},
                             extra={"base_model.model.model.embed_tokens.weight": table,
                                    "base_model.model.lm_head.weight": table})])
    if not torch.equal(ref.read_safetensors(tied_from[:-5] + ".safetensors")["embed.weight"], table):
        failures.append("--lora-from with ensure_weight_tying: the saved tied embedding is not the plan's table")
    key = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    nan = read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors"))[key].clone()
    nan[1, 2] = float("nan")
    for adapter, want in (
            (damaged_adapter(work, peft, "backref", {"target_modules": r"(q)_proj\1"}), "a back-reference"),
            (damaged_adapter(work, peft, "pissa", {"init_lora_weights": "pissa"}), "rewrites the base weights"),
            (damaged_adapter(work, peft, "not-lora", {"peft_type": "IA3", "foo": 1}), "peft_type is \"IA3\", not LORA"),
            (damaged_adapter(work, peft, "nan", extra={key: nan}), "holds nan at element"),
            (damaged_adapter(work, peft, "expert", extra={
                "base_model.model.model.layers.0.mlp.experts.0.gate_proj.lora_A.weight": torch.zeros(4, 64)}),
             "adapters on a mixture's experts the config does not target"),
            (damaged_adapter(work, peft, "parameters", {"target_parameters": ["mlp.experts.gate_up_proj"]}),
             "target_parameters find no parameter of"),
            (damaged_adapter(work, peft, "dora", {"use_dora": True}),
             "has no 'base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector'"),
            (damaged_adapter(work, peft, "unknown", {"foo": 3}), "foo is 3, but mtc does not know this setting"),
            (damaged_adapter(work, peft, "no-targets", {"target_modules": None}), "no target_modules"),
            (damaged_adapter(work, peft, "rank", {"r": 8}), "needs [8, 64]"),
            (damaged_adapter(work, peft, "missing", drop=key), "has no '" + key + "'"),
            (damaged_adapter(work, peft, "extra", extra={"base_model.model.model.foo.weight": torch.ones(64)}),
             "holds 'base_model.model.model.foo.weight', which has no place")):
        lora_from_refused(bin_dir, work, adapter, want, failures)
    lora_from_refused(bin_dir, work, peft, "is not one", failures, model="llama-tiny")
    lora_from_refused(bin_dir, work, peft, "excludes", failures, flags=("--lora", "4"))


def check_phi3_fused(bin_dir, work, data, failures):
    """Phi-3's fused layers (qkv_proj, gate_up_proj) with some of their parts adapted (q and v, not k;
    up, not gate): --export-peft writes one adapter a layer, lora_A its parts' A one after another,
    lora_B their B block-diagonally (each part's rows after the parts before it, k's and gate's rows
    zero), at the summed rank with the alpha that keeps the scale, exactly the trained adapters; the
    merged folder is its weights + scale B A; --lora-from reads it back, to train on or merged."""
    name = "phi3-bf16"
    spec, folder = MODELS[name], os.path.join(work, name)
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    plan, trained, merged, peft, ours, adapters, config = train_and_export(
        bin_dir, folder, data, os.path.join(work, name + ".lora"), 5, "--lora", "4", "--lora-alpha", "8",
        "--lora-targets", r"attn\.(q|v)\.|mlp\.up\.")
    C, H, KV = spec["config"]["hidden_size"], spec["config"]["num_attention_heads"], spec["config"]["num_key_value_heads"]
    D, FF = C // H, spec["config"]["intermediate_size"]
    layouts = {"self_attn.qkv_proj": ("attn", [("q", H * D, True), ("k", KV * D, False), ("v", KV * D, True)]),
               "mlp.gate_up_proj": ("mlp", [("gate", FF, False), ("up", FF, True)])}
    given = read_hf_safetensors(os.path.join(folder, "model-00001-of-00002.safetensors"))
    given.update(read_hf_safetensors(os.path.join(folder, "model-00002-of-00002.safetensors")))
    exported = read_hf_safetensors(os.path.join(merged, "model.safetensors"))
    want, worst = {}, 0.0
    for layer in range(spec["config"]["num_hidden_layers"]):
        for module, (block, parts) in layouts.items():
            key = f"base_model.model.model.layers.{layer}.{module}"
            a_rows, b = [], torch.zeros(sum(rows for _, rows, _ in parts), 4 * sum(on for _, _, on in parts))
            row = 0
            for part, rows, on in parts:
                if on:
                    stem = f"layers.{layer}.{block}.{part}"
                    b[row:row + rows, 4 * len(a_rows):4 * len(a_rows) + 4] = ours[stem + ".lora_B.weight"]
                    a_rows.append(ours[stem + ".lora_A.weight"])
                row += rows
            want[key + ".lora_A.weight"], want[key + ".lora_B.weight"] = torch.cat(a_rows), b
            w = f"model.layers.{layer}.{module}.weight"
            worst = max(worst, ref.rel_err(exported[w], given[w].float() + 2.0 * b @ torch.cat(a_rows)))
    if set(adapters) != set(want) or any(not torch.equal(adapters[k], want[k]) for k in want):
        failures.append(f"phi3 --export-peft: keys {sorted(set(adapters) ^ set(want))[:4]} on one side only, or "
                        f"values that are not the trained adapters stacked and block-diagonal")
    expected = {"r": 8, "lora_alpha": 16.0, "rank_pattern": {"gate_up_proj": 4}, "alpha_pattern": {"gate_up_proj": 8.0},
                "target_modules": ["gate_up_proj", "qkv_proj"]}
    wrong = {k: config.get(k) for k, v in expected.items() if config.get(k) != v}
    if wrong or worst > 1e-6:
        failures.append(f"phi3 --export-peft: adapter_config.json has {wrong} (want {expected}); the merged folder "
                        f"within {worst:.1e} of W + 2 B A")
    print(f"phi3 --export-peft: {len(adapters)} tensors, qkv_proj at rank {config.get('r')}, gate_up_proj at "
          f"{config.get('rank_pattern')}; merged within {worst:.1e} of W + 2 B A")
    # Back with --lora-from: every part of an adapted layer takes the layer's A and its rows of B (k's
    # and gate's zero), so the plan scores the data as the plan that trained the adapters; a
    # forward-only plan has them merged as --export-hf merged them (other ranks: to rounding).
    back, gen, merged_gen = (os.path.join(work, name + s) for s in (".from.plan", ".from-gen.plan", ".merged-gen.plan"))
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", back,
             "--lora-from", peft])
    start, wrong = ref.read_safetensors(back[:-5] + ".safetensors"), []
    for layer in range(spec["config"]["num_hidden_layers"]):
        for module, (block, parts) in layouts.items():
            key, row = f"base_model.model.model.layers.{layer}.{module}", 0
            for part, rows, _ in parts:
                stem = f"layers.{layer}.{block}.{part}"
                if not torch.equal(start.get(stem + ".lora_A.weight", torch.zeros(0)), want[key + ".lora_A.weight"]) or \
                        not torch.equal(start.get(stem + ".lora_B.weight", torch.zeros(0)),
                                        want[key + ".lora_B.weight"][row:row + rows]):
                    wrong.append(stem)
                row += rows
    adapted_loss = eval_loss(bin_dir, plan, data, "--weights", trained)
    from_loss = eval_loss(bin_dir, back, data)
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq", "64", "-o", gen, "--lora-from", peft])
    ref.run([f"{bin_dir}/mtc", merged, "--forward-only", "--batch", "1", "--seq", "64", "-o", merged_gen])
    a, b = ref.read_safetensors(gen[:-5] + ".safetensors"), ref.read_safetensors(merged_gen[:-5] + ".safetensors")
    merge_err = max(ref.rel_err(a[k], b[k]) for k in b) if set(a) == set(b) else float("inf")
    if wrong or abs(from_loss - adapted_loss) > 1e-6 * adapted_loss or merge_err > 1e-6:
        failures.append(f"phi3 --lora-from: adapters of {wrong[:3]} are not the layer's A and their rows of B; the "
                        f"plan scores {from_loss} (trained {adapted_loss}); forward-only merged within {merge_err:.1e}")
    print(f"phi3 --lora-from: every part the layer's A and its rows of B; scores {from_loss:.6f} (trained "
          f"{adapted_loss:.6f}); forward-only merged within {merge_err:.1e} of --export-hf's")


def all_linear_adapters(bin_dir, work, data, name):
    """MODELS[name]'s folder written and trained 3 steps with --lora 4 --lora-targets all-linear: its
    spec, folder, adapter folder, trained tensors, and the adapter folder's tensors and config."""
    spec, folder = MODELS[name], os.path.join(work, name)
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    _, _, _, peft, ours, adapters, config = train_and_export(
        bin_dir, folder, data, os.path.join(work, name + ".lora"), 3, "--lora", "4", "--lora-targets", "all-linear")
    return spec, folder, peft, ours, adapters, config


def lora_from_gives_back(bin_dir, work, name, folder, peft, trained, failures):
    """mtc `folder` --lora-from `peft` (the adapter folder a run exported): its initial weights are
    the run's `trained` tensors, bit for bit."""
    back = os.path.join(work, name + ".from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", back,
             "--lora-from", peft])
    start = ref.read_safetensors(back[:-5] + ".safetensors")
    if set(start) != set(trained) or any(not torch.equal(start[k], trained[k]) for k in trained):
        failures.append(f"{name} --lora-from: the initial weights are not the trained adapters on the folder's")


def check_qwen2_moe_all_linear(bin_dir, work, data, failures):
    """all-linear on Qwen2-MoE adapts, as PEFT's does, every nn.Linear of the layers but the LM head:
    the attention's, the dense layer's MLP, and the shared expert's projections and its gate
    (mlp.shared_expert.*_proj, mlp.shared_expert_gate), not the router or the routed experts (bare
    parameters in transformers 5). --export-peft names the shared expert's projections one by one
    (a kind's name, gate_proj, would find the routed experts' too) and the gate by its kind;
    --lora-from reads the folder back onto the trained adapters, bit for bit."""
    name = "qwen2-moe-bf16"
    spec, folder, peft, ours, adapters, config = all_linear_adapters(bin_dir, work, data, name)
    layers, dense = spec["config"]["num_hidden_layers"], spec["config"]["mlp_only_layers"]
    want = {f"layers.{l}.attn.{m}" for l in range(layers) for m in "qkvo"}
    want |= {f"layers.{l}.mlp.{m}" for l in dense for m in ("gate", "up", "down")}
    want |= {f"layers.{l}.moe.{m}" for l in range(layers) if l not in dense
             for m in ("shared.gate", "shared.up", "shared.down", "shared_gate")}
    adapted = {k[:-len(".lora_A.weight")] for k in ours if k.endswith(".lora_A.weight")}
    shared_modules = {f"model.layers.{l}.mlp.shared_expert.{m}_proj" for l in range(layers) if l not in dense
                      for m in ("gate", "up", "down")}
    targets = set(config.get("target_modules") or [])
    if adapted != want or not shared_modules <= targets or "shared_expert_gate" not in targets or \
            any(t in targets for t in ("gate_proj", "up_proj", "down_proj", "gate")):
        failures.append(f"qwen2-moe all-linear: adapted {sorted(adapted ^ want)[:4]} on one side only, or "
                        f"target_modules {sorted(targets)} do not name the shared expert's layers alone")
    lora_from_gives_back(bin_dir, work, name, folder, peft, ours, failures)
    print(f"qwen2-moe all-linear: {len(adapted)} layers adapted (the shared experts' and their gates among them), "
          f"{len(adapters)} adapter tensors; --lora-from back bit for bit")


def check_shared_experts_all_linear(bin_dir, work, data, failures, name, attention):
    """all-linear on GLM-4.5 (DeepSeek-V3 and -V2, Ernie 4.5's mixtures alike) adapts the attention's projections
    (`attention`: DeepSeek-V3's latent attention's q_a, q_b, kv_a, kv_b and o, V2's q in place of q_a
    and q_b), the dense first layer's MLP and the shared experts' (mlp.shared_experts.*_proj,
    nn.Linear modules of their own), not the router (a TopkRouter's bare parameter, its choice bias a
    buffer; DeepSeek-V2's an nn.Linear its forward reads the weight of, below) or the routed experts;
    --export-peft names the shared experts' layers one by one; --lora-from reads the folder back, bit
    for bit. Returns the folder, the adapter folder and the trained tensors."""
    spec, folder, peft, ours, adapters, config = all_linear_adapters(bin_dir, work, data, name)
    layers = spec["config"]["num_hidden_layers"]
    moe = [l for l in range(layers) if moe_layer(spec["config"], l)]
    want = {f"layers.{l}.attn.{m}" for l in range(layers) for m in attention}
    want |= {f"layers.{l}.mlp.{m}" for l in range(layers) if l not in moe for m in ("gate", "up", "down")}
    want |= {f"layers.{l}.moe.shared.{m}" for l in moe for m in ("gate", "up", "down")}
    adapted = {k[:-len(".lora_A.weight")] for k in ours if k.endswith(".lora_A.weight")}
    shared_modules = {f"model.layers.{l}.mlp.shared_experts.{m}_proj" for l in moe for m in ("gate", "up", "down")}
    targets = set(config.get("target_modules") or [])
    if adapted != want or not shared_modules <= targets or \
            any(t in targets for t in ("gate_proj", "up_proj", "down_proj", "gate")):
        failures.append(f"{name} all-linear: adapted {sorted(adapted ^ want)[:4]} on one side only, or "
                        f"target_modules {sorted(targets)} do not name the shared experts' layers alone")
    lora_from_gives_back(bin_dir, work, name, folder, peft, ours, failures)
    print(f"{name} all-linear: {len(adapted)} layers adapted (the shared experts' among them), "
          f"{len(adapters)} adapter tensors; --lora-from back bit for bit")
    return folder, peft, ours


def check_deepseek_v2_router_adapters(bin_dir, work, data, failures):
    """PEFT's all-linear on transformers' DeepSeek-V2 wraps its router too (DeepseekV2Moe.gate is an
    nn.Linear), but the forward reads gate.weight, the base layer's, so those adapters never train and
    keep B's zeros: such a folder (target_modules all-linear) reads back as without them, bit for bit;
    a router adapter whose B is not zero is refused by name."""
    name = "deepseek-v2-bf16"
    folder, peft, ours = check_shared_experts_all_linear(bin_dir, work, data, failures, name, ("q", "kv_a", "kv_b", "o"))
    cfg = MODELS[name]["config"]
    moe_layers = range(cfg["first_k_dense_replace"], cfg["num_hidden_layers"])
    gate = "base_model.model.model.layers.{}.mlp.gate.lora_{}.weight"
    router_adapters = {}
    for layer in moe_layers:
        router_adapters[gate.format(layer, "A")] = torch.randn(4, cfg["hidden_size"])
        router_adapters[gate.format(layer, "B")] = torch.zeros(cfg["n_routed_experts"], 4)
    with_router = damaged_adapter(work, peft, "v2-router-adapters", {"target_modules": "all-linear"},
                                  extra=router_adapters)
    lora_from_gives_back(bin_dir, work, name, folder, with_router, ours, failures)
    trained_b = dict(router_adapters)
    trained_b[gate.format(moe_layers[0], "B")] = torch.full((cfg["n_routed_experts"], 4), 1e-3)
    lora_from_refused(bin_dir, work, damaged_adapter(work, peft, "v2-router-trained", {"target_modules": "all-linear"},
                                                     extra=trained_b),
                      f"'{gate.format(moe_layers[0], 'B')}' is not all zeros (element 0): transformers' DeepSeek-V2 "
                      "reads its router's weight without the adapter", failures, model=folder)
    print("deepseek-v2 all-linear: PEFT's router adapters (never trained) read as the no-op they are; a trained one "
          "refused")


def check_granitemoe_lora(bin_dir, work, data, failures):
    """all-linear on GraniteMoE adapts, as PEFT's does, the attention's projections and the router
    (block_sparse_moe.router.layer, an nn.Linear there), not the experts (one parameter of a
    GraniteMoeParallelExperts each side); --export-peft writes them, --lora-from reads the folder
    back onto the trained adapters bit for bit, its config's target_modules as written (the
    kinds' names, the router's "layer") or as "all-linear". The experts' stacks adapted (--lora-experts): --export-peft refused by name before
    any step, --export-hf merges them."""
    name = "granitemoe-bf16"
    spec, folder = MODELS[name], os.path.join(work, name)
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    plan, _, _, peft, ours, adapters, config = train_and_export(
        bin_dir, folder, data, os.path.join(work, name + ".lora"), 3, "--lora", "4", "--lora-targets", "all-linear")
    layers = spec["config"]["num_hidden_layers"]
    want = {f"layers.{l}.attn.{m}" for l in range(layers) for m in "qkvo"} | \
        {f"layers.{l}.moe.router" for l in range(layers)}
    adapted = {k[:-len(".lora_A.weight")] for k in ours if k.endswith(".lora_A.weight")}
    routers = {f"base_model.model.model.layers.{l}.block_sparse_moe.router.layer.lora_A.weight" for l in range(layers)}
    if adapted != want or not routers <= set(adapters):
        failures.append(f"granitemoe all-linear: adapted {sorted(adapted ^ want)[:4]} on one side only, or the "
                        f"adapter file lacks the routers' ({sorted(routers - set(adapters))[:2]})")
    if sorted(config["target_modules"]) != ["k_proj", "layer", "o_proj", "q_proj", "v_proj"]:
        failures.append(f"granitemoe all-linear: --export-peft wrote target_modules {config['target_modules']!r}")
    for targets in (config["target_modules"], "all-linear"):
        with open(os.path.join(peft, "adapter_config.json"), "w") as f:
            json.dump(dict(config, target_modules=targets), f)
        back = os.path.join(work, name + ".from.plan")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", back,
                 "--lora-from", peft])
        start = ref.read_safetensors(back[:-5] + ".safetensors")
        if set(start) != set(ours) or any(not torch.equal(start[k], ours[k]) for k in ours):
            failures.append(f"granitemoe --lora-from (target_modules {targets!r}): the initial weights are not the "
                            "trained adapters on the folder's")
    experts_plan = os.path.join(work, name + ".experts.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", experts_plan,
             "--lora", "4", "--lora-experts", r"moe\.(gate|up|down)"])
    refused = subprocess.run([f"{bin_dir}/mtrun", experts_plan, "--data", data, "--steps", "1", "--export-peft",
                              os.path.join(work, name + ".experts-peft")], capture_output=True, text=True)
    if refused.returncode == 0 or "is a stack of GraniteMoE's experts" not in refused.stderr + refused.stdout or \
            "step 1" in refused.stdout:
        failures.append(f"granitemoe --export-peft of the experts' stacks: exit {refused.returncode}: "
                        f"{refused.stdout}{refused.stderr}")
    merged = os.path.join(work, name + ".experts-hf")
    ref.run([f"{bin_dir}/mtrun", experts_plan, "--data", data, "--steps", "2", "--lr", "1e-2", "--export-hf", merged])
    if not os.path.exists(os.path.join(merged, "model.safetensors")):
        failures.append("granitemoe --export-hf of the experts' adapters wrote no weights")
    print(f"granitemoe all-linear: {len(adapted)} layers adapted (the routers among them), {len(adapters)} adapter "
          "tensors; --lora-from back bit for bit; the experts' stacks refused by --export-peft, merged by --export-hf")


def check_fused_mlp(bin_dir, work, data, failures, name, mlp, fused, down):
    """A model whose MLP holds gate and up in one nn.Linear, `mlp`.`fused` (Granite 4.0's
    shared_mlp.input_linear, GLM-4's mlp.gate_up_proj), which PEFT adapts whole (as Phi-3's
    gate_up_proj): all-linear's gate and up adapters are written as one adapter of it, their A one after
    another and B block-diagonal (rank 8 from two of 4), down's as `down`'s; --lora-from reads the
    folder back, every part the layer's A and its rows of B, and the plan scores the data as the plan
    that trained them."""
    spec, folder = MODELS[name], os.path.join(work, name)
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    plan, trained, _, peft, ours, adapters, config = train_and_export(
        bin_dir, folder, data, os.path.join(work, name + ".lora"), 3, "--lora", "4", "--lora-targets", "all-linear")
    layers = spec["config"]["num_hidden_layers"]
    want = {f"base_model.model.model.layers.{l}.{m}.lora_{ab}.weight" for l in range(layers) for ab in "AB"
            for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                      f"{mlp}.{fused}", f"{mlp}.{down}")}
    fused_a = adapters.get(f"base_model.model.model.layers.0.{mlp}.{fused}.lora_A.weight")
    fused_b = adapters.get(f"base_model.model.model.layers.0.{mlp}.{fused}.lora_B.weight")
    FF = spec["config"].get("shared_intermediate_size") or spec["config"]["intermediate_size"]
    stacked_a = torch.cat([ours["layers.0.mlp.gate.lora_A.weight"], ours["layers.0.mlp.up.lora_A.weight"]])
    block_b = torch.zeros(2 * FF, 8)
    block_b[:FF, :4], block_b[FF:, 4:] = ours["layers.0.mlp.gate.lora_B.weight"], ours["layers.0.mlp.up.lora_B.weight"]
    if set(adapters) != want or fused_a is None or not torch.equal(fused_a, stacked_a) or \
            not torch.equal(fused_b, block_b) or fused not in config["target_modules"]:
        failures.append(f"{name} --export-peft: keys {sorted(set(adapters) ^ want)[:4]} on one side only, or "
                        f"{fused}'s adapter is not gate's and up's stacked and block-diagonal (target_modules "
                        f"{config['target_modules']})")
    back = os.path.join(work, name + ".from.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", back,
             "--lora-from", peft])
    adapted_loss, from_loss = eval_loss(bin_dir, plan, data, "--weights", trained), eval_loss(bin_dir, back, data)
    if abs(from_loss - adapted_loss) > 1e-6 * adapted_loss:
        failures.append(f"{name} --lora-from: the plan scores {from_loss} (trained {adapted_loss})")
    rank = fused_a.shape[0] if fused_a is not None else "?"
    print(f"{name} all-linear: {fused}'s adapter gate's and up's (rank {rank}); --lora-from scores {from_loss:.6f} "
          f"(trained {adapted_loss:.6f})")


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
    check_lora_from(bin_dir, work, data, failures)
    check_dora(bin_dir, work, data, failures)
    check_phi3_fused(bin_dir, work, data, failures)
    check_qwen2_moe_all_linear(bin_dir, work, data, failures)
    check_shared_experts_all_linear(bin_dir, work, data, failures, "glm4-moe-bf16", "qkvo")
    check_shared_experts_all_linear(bin_dir, work, data, failures, "deepseek-v3-f32", ("q_a", "q_b", "kv_a", "kv_b", "o"))
    check_deepseek_v2_router_adapters(bin_dir, work, data, failures)
    check_shared_experts_all_linear(bin_dir, work, data, failures, "ernie4_5-moe-bf16", "qkvo")
    check_granitemoe_lora(bin_dir, work, data, failures)
    check_fused_mlp(bin_dir, work, data, failures, "granite4-f32", "shared_mlp", "input_linear", "output_linear")
    check_fused_mlp(bin_dir, work, data, failures, "glm4-bf16", "mlp", "gate_up_proj", "down_proj")
    ref.finish("hf_peft", failures)


if __name__ == "__main__":
    main()
