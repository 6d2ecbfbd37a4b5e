"""Hugging Face model folders in and out (issue 16): a folder as transformers writes it
(config.json and safetensors under Hugging Face's names, BF16 in two shards with an index, F16
in one file, or GPT-2's F32 with its Conv1D [in, out] weights, fused c_attn and causal-mask
buffers) is compiled by mtc and trained by mtrun from those weights (found beside the plan,
no --weights); the losses must follow a PyTorch model written the way transformers'
modeling_llama / modeling_gpt2 compute (their names, rotate_half RoPE, repeat_kv; Conv1D, GELU's
tanh form) over 20 steps within 1e-4 relative, and the first step's gradients, tensor by tensor in
Hugging Face's layout, within 1e-5 (measured: under 1e-6). GPT-2's dropout is named in mtc's summary as not
applied (the twin runs without it). mtrun --export-hf writes the trained weights back as a folder: exactly the exported
weights under Hugging Face's names (f32), or their bf16 rounding (to nearest even), with the
input's config; that folder compiles again to the same weights bit for bit and gives the
transformers-style model's loss. Then
the refusals: settings mtc does not implement and tensors without a place are errors naming them.
(Training part of a folder, --trainable and --lora, is tests/e2e/hf_peft.py.) The folders' specs
and writers are hf_folders.py's, the transformers-style twins hf_twins.py's.

usage: /usr/bin/python3 tests/e2e/hf_import.py BIN_DIR WORK_DIR
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from hf_folders import (CARRIED, GEMMA3_TOKENIZER, GPT2, MODELS, expect_refusals, gpt2_buffers,  # noqa: E402
                        gpt2_weights, hf_layout, hf_weights, mtc_error, read_hf_safetensors, write_folder,
                        write_gemma3_multimodal, write_mistral3_multimodal, write_safetensors)
from hf_twins import GRAD_TOL, LOSS_TOL, gpt2_logits, hf_logits, padding_id  # noqa: E402

torch.set_num_threads(2)
SCHEDULE = ref.Schedule(steps=20, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=4, seq=32)


def plan_listing(bin_dir, folder, plan, flags, config=None):
    """mtdump's listing of the plan mtc compiles from `folder` with `flags` and without its weights;
    `config`: written to the folder as its config.json first (a folder of a config alone)."""
    if config is not None:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
    ref.run([f"{bin_dir}/mtc", folder, "--no-weights", "-o", plan] + flags)
    return subprocess.run([f"{bin_dir}/mtdump", plan], capture_output=True, text=True, check=True).stdout


def granite_heads(bin_dir, work, folder, summary, failures):
    """Granite's logits_scaling divides an LM head's logits (the hidden states times 1/6 before it),
    not a reward model's score (transformers' GraniteForSequenceClassification); its attention
    dropout is named as not applied."""
    if "asks for dropout (attention_dropout 0.1); mtc trains without dropout" not in summary:
        failures.append("granite: the summary does not say that attention_dropout is not applied")
    scales = {}
    for objective in ("lm", "reward"):
        dump = plan_listing(bin_dir, folder, os.path.join(work, f"granite-{objective}.plan"),
                            ["--batch", "2", "--seq", "16"] + (["--objective", "reward"] if objective == "reward" else []))
        scales[objective] = re.findall(r"mt\.scale\(.*\{([0-9.e+-]+)\}", dump)
    if "0.166667" not in scales["lm"] or "0.166667" in scales["reward"] or "12" not in scales["reward"]:
        failures.append(f"granite: the forward scales are {scales} (want 1/6 before the LM head alone)")
    print("granite-f32: logits / 6 before the LM head, not before a reward model's score head")


def gemma2_heads(bin_dir, work, folder, data, losses, failures):
    """Gemma 2's final_logit_softcapping caps an LM head's logits (mt.softcap, and its gradient), not a
    reward model's score (transformers' Gemma2ForSequenceClassification); its attention scores are
    capped in both (every mt.attention call's float attribute, 2); the same config as transformers 5
    saves it (rope_parameters, layer_types, dtype, use_bidirectional_attention null) gives the same
    attention calls (heads, windows, caps). The logits' cap split into vocabulary chunks
    (mt-split-vocab) and token tiles (mt-tile-tokens) trains as the whole: the 20 losses of each
    within 1e-5 relative of the plain plan's (`losses`)."""
    cfg = dict(MODELS["gemma2-f32"]["config"], architectures=["Gemma2ForCausalLM"], dtype="float32",
               rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
               layer_types=["sliding_attention", "full_attention", "sliding_attention"],
               use_bidirectional_attention=None)
    for key in ("rope_theta", "torch_dtype", "hidden_act", "sliding_window_size"):
        cfg.pop(key)
    v5_folder = os.path.join(work, "gemma2-transformers5")
    calls = {}
    for objective, source, config in (("lm", folder, None), ("reward", folder, None), ("lm", v5_folder, cfg)):
        flags = ["--batch", "2", "--seq", "16"] + (["--objective", "reward"] if objective == "reward" else [])
        dump = plan_listing(bin_dir, source, os.path.join(work, f"gemma2-{objective}.plan"), flags, config)
        caps = re.findall(r"mt\.softcap(?:_grad)?\(.*\{([0-9.e+-]+)\}", dump)
        attention = re.findall(r"mt\.attention(?:_grad)?\(.*\{([0-9 |]+)\}", dump)
        want_caps = ["1", "1"] if objective == "lm" else []
        capped = [a.endswith(" | 2") for a in attention]  # [heads, kv heads(, window)] | the softcap
        calls[source] = attention
        if caps != want_caps or len(attention) != 6 or not all(capped):
            failures.append(f"gemma2 {objective} ({source}): logit caps {caps} (want {want_caps}), attention "
                            f"attributes {attention} (want each of 6 calls capped at 2)")
    if calls[v5_folder] != calls[folder]:
        failures.append(f"gemma2: transformers 5's config gives the attention calls {calls[v5_folder]}, the folder's "
                        f"{calls[folder]}")
    for flags in (["--token-tiles", "2"], ["--vocab-chunks", "2", "--embedding", "host"]):
        plan, log = os.path.join(work, "gemma2-split.plan"), os.path.join(work, "gemma2-split.jsonl")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan]
                + flags)
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--print-every", "10"]
                + SCHEDULE.mtrun_flags())
        split = [json.loads(line)["loss"] for line in open(log)]
        if len(split) != len(losses) or any(abs(a - b) > 1e-5 * abs(b) for a, b in zip(split, losses)):
            failures.append(f"gemma2 {' '.join(flags)}: losses {split}, the plain plan's {losses}")
    print("gemma2-f32: the logits capped at 1 before the LM head's loss, not a reward model's score; every attention "
          "call's scores capped at 2; the same calls from transformers 5's config; token tiles and vocabulary chunks "
          "train as the whole")


def gemma_activation(bin_dir, work, folder, summary, failures):
    """Gemma 1's legacy hidden_act "gelu" is said in the summary to be read as GELU's tanh form
    (check_export checks that the exported config names it gelu_pytorch_tanh); the config as
    transformers 5 saves it (hidden_act gelu_pytorch_tanh, rope_parameters, dtype,
    use_bidirectional_attention null) compiles to the same plan as the folder's."""
    if 'hidden_act "gelu" is Gemma\'s legacy name for GELU\'s tanh form' not in summary:
        failures.append("gemma: the summary does not say how the legacy hidden_act \"gelu\" is read")
    cfg = dict(MODELS["gemma-f32"]["config"], architectures=["GemmaForCausalLM"], dtype="float32",
               hidden_act="gelu_pytorch_tanh", rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
               use_bidirectional_attention=None)
    for key in ("rope_theta", "rope_scaling", "torch_dtype"):
        cfg.pop(key)
    listings = [plan_listing(bin_dir, source, os.path.join(work, f"gemma-{tag}.plan"), ["--batch", "2", "--seq", "16"],
                             config).split("\n", 1)[1]  # after the first line, which names the folder
                for tag, source, config in (("legacy", folder, None),
                                            ("v5", os.path.join(work, "gemma-transformers5"), cfg))]
    if listings[0] != listings[1]:
        failures.append("gemma: transformers 5's config compiles to another plan than the legacy config's:\n" +
                        "\n".join(difflib.unified_diff(listings[0].splitlines(), listings[1].splitlines(), lineterm="",
                                                       n=0)))
    print("gemma-f32: hidden_act \"gelu\" read as GELU's tanh form and said so; transformers 5's config gives the same "
          "plan")


def default_dropout_named(bin_dir, work, name, spec, left_out, needle, failures):
    """The model's config without the dropout keys `left_out`: the summary names their config class's
    rates as not applied (`needle`: "... by default"), as transformers would train with them."""
    config = {k: v for k, v in spec["config"].items() if k not in left_out}
    folder = os.path.join(work, name + "-default-dropout")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(config, architectures=[spec["architecture"]]), f)
    out = subprocess.run([f"{bin_dir}/mtc", folder, "--no-weights", "-o", folder + ".plan"], capture_output=True,
                         text=True, check=True).stdout
    if needle not in out:
        failures.append(f"{name} without {left_out}: the summary does not name its config class's rates:\n{out}")


def seed_oss_dropout(bin_dir, work, summary, failures):
    """Seed-OSS's dropout named as not applied, SeedOssConfig's 0.1 said as its default where the config
    names none."""
    if "asks for dropout (attention_dropout 0.1, residual_dropout 0.1); mtc trains without dropout" not in summary:
        failures.append("seed-oss: the summary does not say that the config's dropout is not applied")
    default_dropout_named(bin_dir, work, "seed-oss", MODELS["seed-oss-bf16"], ["residual_dropout"],
                          "(attention_dropout 0.1, residual_dropout 0.1 by default)", failures)


def olmo3_sliding_rotary(cfg, weights, tokens, failures):
    """The twin mtc is held to sees OLMo 3's sliding layers' unscaled rotary embedding: with YaRN on
    every layer (as transformers 5 releases before huggingface/transformers#45945 compute it) the same
    weights give other logits, far past what the loss tolerance lets through."""
    x = torch.tensor([int(t) for t in tokens[:4 * 32]]).view(4, 32)
    params = {k: v.float() for k, v in weights.items()}
    every_layer = dict(cfg, model_type="olmo2", layer_types=["sliding_attention"] * 3 + ["full_attention"])
    with torch.no_grad():
        ours, scaled = hf_logits(params, cfg, x), hf_logits(params, every_layer, x)
        losses = [float(F.cross_entropy(z[:, :-1].reshape(-1, z.shape[-1]), x[:, 1:].reshape(-1)))
                  for z in (ours, scaled)]
    gap = abs(losses[0] - losses[1]) / losses[0]
    if gap < 10 * LOSS_TOL:
        failures.append(f"olmo3: YaRN on every layer moves the twin's loss by {gap:.1e} only: the check cannot tell")
    print(f"olmo3: YaRN on the sliding layers too moves the logits by up to {float((ours - scaled).abs().max()):.3f} "
          f"(max |logit| {float(ours.abs().max()):.2f}), the loss by {gap:.1e} relative")


def olmo3_rotary_forms(bin_dir, work, failures):
    """OLMo 3's other ways to say the same model: its layer types named (the published configs' form),
    transformers 5's rope_parameters per layer type; and one rope_parameters without a scaling, as
    rope_theta alone. Each compiles to the plan of the config it restates."""
    spec = MODELS["olmo3-bf16"]
    base = dict(spec["config"], architectures=[spec["architecture"]])
    yarn = dict(base["rope_scaling"])
    flags = ["--batch", "1", "--seq", "16", "--forward-only"]
    pairs = [("layer types", base, dict(base, layer_types=["sliding_attention"] * 3 + ["full_attention"])),
             ("per layer type", base, dict(base, rope_theta=None, rope_scaling=None, rope_parameters={
                 "full_attention": dict(yarn, rope_theta=500000.0),
                 "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}})),
             ("unscaled", dict(base, rope_scaling=None),
              dict(base, rope_theta=None, rope_scaling=None, rope_parameters={"rope_type": "default",
                                                                              "rope_theta": 500000.0}))]
    for what, config, restated in pairs:
        folder = os.path.join(work, "olmo3-form")  # one name: the listings name the model by its folder
        listings = [plan_listing(bin_dir, folder, folder + ".plan", flags, c) for c in (config, restated)]
        if listings[0] != listings[1]:
            failures.append(f"olmo3 {what}: the plans differ:\n" + "".join(
                difflib.unified_diff(*(x.splitlines(True) for x in listings), n=0))[:2000])
    print("olmo3: its layer types named, rope_parameters per layer type and one unscaled rope_parameters each compile "
          "to the plan of the config they restate")


def exaone4_layer_forms(bin_dir, work, failures):
    """Exaone 4's layers named by layer_types (the published configs' form) or derived by Exaone4Config's
    rule from sliding_window_pattern, given or its default 4, compile to one plan."""
    spec = MODELS["exaone4-bf16"]
    base = dict(spec["config"], architectures=[spec["architecture"]])
    derived = {k: v for k, v in base.items() if k not in ("layer_types", "sliding_window_pattern")}
    flags = ["--batch", "1", "--seq", "16", "--forward-only"]
    folder = os.path.join(work, "exaone4-form")  # one name: the listings name the model by its folder
    published = plan_listing(bin_dir, folder, folder + ".plan", flags, base)
    for what, config in (("sliding_window_pattern 4", dict(derived, sliding_window_pattern=4)),
                         ("Exaone4Config's default pattern", derived)):
        listing = plan_listing(bin_dir, folder, folder + ".plan", flags, config)
        if listing != published:
            failures.append(f"exaone4 {what}: the plan differs from the layer types':\n" + "".join(
                difflib.unified_diff(published.splitlines(True), listing.splitlines(True), n=0))[:2000])
    print("exaone4: its layer types named, sliding_window_pattern 4 and Exaone4Config's default pattern compile to one "
          "plan")


def class_defaults(bin_dir, work, failures):
    """A config leaving out head_dim or rms_norm_eps compiles to the plan of one giving its config class's
    defaults (transformers 4.57's and 5's alike): Qwen3Config's head_dim 128 (not hidden / heads),
    MixtralConfig's eps 1e-5, GptOssConfig's head_dim 64 and eps 1e-5, Exaone4Config's eps 1e-5."""
    flags = ["--batch", "1", "--seq", "16", "--forward-only"]
    for model, defaults in (("qwen3-bf16", {"head_dim": 128, "rms_norm_eps": 1e-6}),
                            ("mixtral-f16", {"rms_norm_eps": 1e-5}),
                            ("gpt-oss-bf16", {"head_dim": 64, "rms_norm_eps": 1e-5}),
                            ("exaone4-bf16", {"rms_norm_eps": 1e-5})):
        spec = MODELS[model]
        given = dict(spec["config"], architectures=[spec["architecture"]], **defaults)
        absent = {k: v for k, v in given.items() if k not in defaults}
        folder = os.path.join(work, "defaults-form")  # one name: the listings name the model by its folder
        listings = [plan_listing(bin_dir, folder, folder + ".plan", flags, c) for c in (given, absent)]
        if listings[0] != listings[1]:
            failures.append(f"{model} without {sorted(defaults)}: the plan is not that of {defaults}:\n" + "".join(
                difflib.unified_diff(*(x.splitlines(True) for x in listings), n=0))[:2000])
    print("class defaults: Qwen3's head_dim, Mixtral's eps, gpt-oss's head_dim and eps, Exaone 4's eps where absent "
          "compile to the plans of their config classes' values")


def padded_embedding_gradients(bin_dir, work, folder, cfg, data, tokens, grads, failures):
    """An untied model whose pad token is in the first batch: the embedding's pad row gets a zero
    gradient (`grads`, the first step's), the other rows theirs, in the plan the test trained and
    with the table's gradient in two vocabulary chunks and on the host (the padding id carried
    into mt.embedding_grad_chunk and the host task), the rest as the plan's."""
    pad, name = padding_id(cfg), "model.embed_tokens.weight"
    x, _ = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    if not (x == pad).any() or cfg["tie_word_embeddings"]:
        failures.append(f"padding: the first batch has no token {pad}, or the head is tied: the check checks nothing")
        return
    if (grads[name][pad] != 0).any() or not (grads[name].abs().sum(1) > 0).sum() > 1:
        failures.append(f"padding: the pad row {pad} of {name}'s gradient is not 0, or no other row has one")
    for flags in (["--vocab-chunks", "2"], ["--embedding", "host"]):
        plan = os.path.join(work, "padded.plan")
        ref.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan]
                + flags)
        dumped = os.path.join(work, "padded.grads.safetensors")
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed),
                 "--dump-grads", dumped])
        got = ref.read_safetensors(dumped)["embed.weight"]
        if (got[pad] != 0).any() or ref.rel_err(got, grads[name]) > 1e-6:
            failures.append(f"padding: {' '.join(flags)} gives the embedding another gradient (pad row "
                            f"{got[pad].abs().max().item():.3g}, {ref.rel_err(got, grads[name]):.3g} from the plan's)")
    print(f"phi3-bf16: the pad token {pad} ({int((x == pad).sum())} of the first batch's tokens) gives its embedding "
          f"row no gradient, in the plan, in 2 vocabulary chunks and on the host")


def check_export(bin_dir, work, name, spec, plan, data, tokens, failures):
    """--export-hf after 5 steps: the folder holds --export's weights under Hugging Face's names and
    the input's config; bf16 is their rounding; the folder compiles and trains from there."""
    out_f32, out_bf16, ours = (os.path.join(work, name + s) for s in ("-out-f32", "-out-bf16", "-out.safetensors"))
    for folder, dtype in ((out_f32, "f32"), (out_bf16, "bf16")):
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "5", "--print-every", "10", "--export", ours,
                 "--export-hf", folder, "--export-dtype", dtype])
    exported = ref.read_safetensors(ours)
    f32 = read_hf_safetensors(os.path.join(out_f32, "model.safetensors"))
    bf16 = read_hf_safetensors(os.path.join(out_bf16, "model.safetensors"))
    gpt2 = spec is GPT2
    want_hf = hf_layout(exported, spec)
    if set(want_hf) != set(f32):
        failures.append(f"{name}: --export-hf tensors {sorted(set(f32) ^ set(want_hf))[:4]} differ from --export's")
    # F32 whatever the export's dtype, as the checkpoints hold them and transformers keeps them: a
    # router's choice bias, Ernie 4.5's router.
    def kept_f32(hf_name):
        return hf_name.endswith("e_score_correction_bias") or \
            (spec.get("architecture") == "Ernie4_5_MoeForCausalLM" and hf_name.endswith(".mlp.gate.weight"))
    for hf_name, tensor in want_hf.items():
        if hf_name in f32 and not torch.equal(f32[hf_name], tensor):
            failures.append(f"{name}: --export-hf f32 '{hf_name}' is not --export's weights in Hugging Face's layout")
        rounded = tensor if kept_f32(hf_name) else tensor.to(torch.bfloat16)
        if hf_name in bf16 and not torch.equal(bf16[hf_name], rounded):
            failures.append(f"{name}: --export-hf bf16 '{hf_name}' is not the bf16 rounding of --export's weights "
                            f"(F32 where transformers keeps it so)")
    # Self-contained (issue 32): the source folder's tokenizer files, chat template and generation
    # config are carried over byte for byte.
    for carried, text in CARRIED.items():
        path = os.path.join(out_bf16, carried)
        if not os.path.exists(path) or open(path).read() != text:
            failures.append(f"{name}: --export-hf did not carry {carried} over from the source folder")
    with open(os.path.join(out_f32, "config.json")) as f:
        config = json.load(f)
    want = dict(spec["config"], architectures=[spec["architecture"]],
                **{"dtype" if "dtype" in spec["config"] else "torch_dtype": "float32"})
    want.pop("auto_map", None)  # the source's custom code, which the export does not carry
    if want["model_type"] == "gemma" and want.get("hidden_act") == "gelu":  # Gemma 1's legacy name, made plain
        want["hidden_act"] = "gelu_pytorch_tanh"
    if want.get("num_nextn_predict_layers"):  # GLM-4.5's prediction layers, neither read nor written
        want["num_nextn_predict_layers"] = 0
    if config != want:
        failures.append(f"{name}: --export-hf config.json {config} is not the input's with torch_dtype float32")
    # The folder compiles again, and its first loss is the transformers-style model's on its weights.
    again, log = os.path.join(work, name + "-again.plan"), os.path.join(work, name + "-again.jsonl")
    ref.run([f"{bin_dir}/mtc", out_f32, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", again])
    reimported = ref.read_safetensors(again[:-5] + ".safetensors")
    if reimported.keys() != exported.keys() or any(not torch.equal(reimported[k], exported[k]) for k in exported):
        failures.append(f"{name}: export -> re-import does not give the exported weights bit for bit")
    ref.run([f"{bin_dir}/mtrun", again, "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed), "--log", log])
    mt_loss = json.loads(open(log).readline())["loss"]
    x, y = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    with torch.no_grad():
        logits = (gpt2_logits if gpt2 else hf_logits)(f32, spec["config"], x)
        torch_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).item()
    if abs(mt_loss - torch_loss) > 1e-5 * abs(torch_loss):
        failures.append(f"{name}: the exported folder's loss {mt_loss} vs the transformers-style model's {torch_loss}")
    print(f"{name}: --export-hf f32/bf16 match --export; re-imported, loss {mt_loss:.6f} vs {torch_loss:.6f}")


def refusals(bin_dir, work, failures):
    spec = MODELS["llama-bf16-sharded"]
    weights = hf_weights(spec["config"], False, torch.float32, seed=5)
    cases = [  # (name, config changes, weight changes, what the error must say)
        ("rope-scaling", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, None,
         "'rope_scaling': rope type 'dynamic' is not supported (linear, llama3, yarn and longrope are)"),
        ("rope-llama3-partial", {"rope_scaling": {"type": "llama3", "factor": 8.0}}, None,
         "'rope_scaling': no 'low_freq_factor'"),
        # transformers 5's rope_parameters: one form at a time, one base, every layer alike, whole heads.
        ("rope-both-forms", {"rope_scaling": {"rope_type": "linear", "factor": 2.0},
                             "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}, None,
         "both 'rope_scaling' (transformers 4's name) and 'rope_parameters' (transformers 5's) are given"),
        ("rope-theta-twice", {"rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}}, None,
         "'rope_parameters': 'rope_theta' is 500000 but the config's rope_theta is 10000: the folder contradicts"),
        ("rope-per-layer-type", {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                     "sliding_attention": {"rope_type": "default"}}}, None,
         "rotary settings per layer type ('full_attention') are not supported"),
        ("rope-partial-heads", {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}}, None,
         "'partial_rotary_factor' is not 1: a rotary embedding over part of each head is not supported"),
        ("rope-v5-dynamic", {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, None,
         "'rope_parameters': rope type 'dynamic' is not supported"),
        ("unknown-key", {"attn_logit_softcapping": 50.0}, None, "mtc does not know 'attn_logit_softcapping'"),
        # transformers' nn.Embedding refuses a padding_idx outside the table too.
        ("pad-outside", {"pad_token_id": 256}, None,
         "'pad_token_id' 256 is not a token of the 256-token vocabulary (transformers refuses it"),
        ("pad-not-an-id", {"pad_token_id": "0"}, None, "'pad_token_id' is not a whole number (a token id) or null"),
        ("phi3-pad-default", {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3"}, None,
         "the architecture's default 'pad_token_id' 32000 is not a token of the 256-token vocabulary"),
        ("ernie-use-bias", {"architectures": ["Ernie4_5ForCausalLM"], "model_type": "ernie4_5", "use_bias": True},
         None, "'use_bias' is true: biases on Ernie 4.5's projections and MLP are not supported"),
        # Bounded as it is read, before any per-layer rule or placement (a billion layers took all
        # memory; a SmolLM3's NoPE layers or a Qwen's windows listed every layer first).
        ("layers-bound", {"num_hidden_layers": 1000000000}, None,
         "'num_hidden_layers' is 1000000000: at most 1024 layers are supported"),
        ("smollm3-layers-bound", {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3",
                                  "num_hidden_layers": 100000000000, "no_rope_layer_interval": 1, "pad_token_id": 0},
         None,
         "'num_hidden_layers' is 100000000000: at most 1024 layers are supported"),
        ("gpt-neox", {"architectures": ["GPTNeoXForCausalLM"]}, None, "architecture GPTNeoXForCausalLM is not supported"),
        ("qwen2-o-bias", {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "attention_bias": True}, None,
         "'attention_bias' is true: Qwen2's output projection has no bias in transformers"),
        ("missing", {}, lambda w: w.pop("model.layers.1.mlp.up_proj.weight"),
         "the weights have no 'model.layers.1.mlp.up_proj.weight' (the model's layers.1.mlp.up.weight)"),
        ("extra", {}, lambda w: w.update({"model.layers.0.self_attn.o_proj.bias": torch.zeros(64)}),
         "hold 'model.layers.0.self_attn.o_proj.bias', which the LlamaForCausalLM layout mtc reads has no place for"),
        ("shape", {}, lambda w: w.update({"model.norm.weight": torch.ones(32)}),
         "'model.norm.weight' is F32 [32] but the model's norm.weight needs [64]"),
        ("layer-types", {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 16,
                         "layer_types": ["chunked_attention", "full_attention"]}, None,
         "'layer_types' names \"chunked_attention\" for layer 0: only sliding_attention and full_attention"),
        ("window-unknown", {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "layer_types": ["sliding_attention", "full_attention"]}, None,
         "layers slide but 'sliding_window' is not given"),
        # Issue 30 #11, #13: weights that are not finite are refused at import, naming the tensor
        # and the element; a model_type that contradicts the architecture is refused.
        ("nan-weight", {}, lambda w: w["model.layers.1.mlp.up_proj.weight"].view(-1).__setitem__(7, float("nan")),
         "model.safetensors: 'model.layers.1.mlp.up_proj.weight' holds nan at element 7"),
        ("inf-weight", {}, lambda w: w["model.norm.weight"].view(-1).__setitem__(3, float("-inf")),
         "'model.norm.weight' holds -inf at element 3"),
        ("model-type", {"model_type": "gpt2"}, None,
         "'model_type' is \"gpt2\" but the architecture LlamaForCausalLM is of model_type \"llama\""),
        ("config-nan", {"rope_theta": float("nan")}, None, "config.json is not valid JSON: parse error at line"),
        # A reward model's folder (...ForSequenceClassification): one label, compiled as one.
        ("classifier-labels", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "A", "1": "B"}},
         None, "the classifier has 2 labels (id2label): mtc trains reward models, one score per sequence"),
        ("classifier-default-labels", {"architectures": ["LlamaForSequenceClassification"]}, None,
         "the classifier has 2 labels (num_labels, transformers' default)"),
        ("classifier-num-labels", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "LABEL_0"},
                                   "num_labels": 3}, None, "the classifier has 3 labels (num_labels)"),
        ("classifier-objective", {"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "LABEL_0"}},
         lambda w: (w.pop("lm_head.weight", None), w.update({"score.weight": torch.zeros(1, 64)})),
         "is a reward model (LlamaForSequenceClassification: one score per sequence, no LM head): compile it with "
         "--objective reward"),
    ]
    expect_refusals(bin_dir, work, spec, weights, cases, failures)
    # A mixture of experts' own: a negative auxiliary loss coefficient, an expert missing.
    moe = MODELS["qwen3-moe-bf16-sharded"]
    moe_weights = hf_weights(moe["config"], False, torch.float32, seed=5)
    moe_cases = [
        ("moe-aux-loss", {"output_router_logits": True, "router_aux_loss_coef": -0.01}, None,
         "'router_aux_loss_coef' is not a finite number of at least 0"),
        ("moe-expert", {}, lambda w: w.pop("model.layers.2.mlp.experts.3.up_proj.weight"),
         "the weights have no 'model.layers.2.mlp.experts.3.up_proj.weight' (the model's layers.2.moe.up.weight)"),
        ("moe-expert-shape", {}, lambda w: w.update({"model.layers.0.mlp.experts.1.down_proj.weight": torch.zeros(64, 16)}),
         "'model.layers.0.mlp.experts.1.down_proj.weight' is F32 [64,16] but the model's layers.0.moe.down.weight "
         "needs [64,32]"),
    ]
    expect_refusals(bin_dir, work, moe, moe_weights, moe_cases, failures)
    # Qwen2-MoE's: sliding layers its transformers versions place differently, a bias on the output
    # projection (none in transformers), the shared expert's gate missing.
    qwen2_moe = MODELS["qwen2-moe-bf16"]
    qwen2_moe_cases = [
        ("qwen2-moe-sliding", {"use_sliding_window": True}, None,
         "'use_sliding_window' is true without 'layer_types': which of Qwen2-MoE's layers slide differs between "
         "transformers 4 and 5"),
        ("qwen2-moe-attention-bias", {"attention_bias": True}, None,
         "Qwen2's output projection has no bias in transformers"),
        ("qwen2-moe-shared-gate", {}, lambda w: w.pop("model.layers.2.mlp.shared_expert_gate.weight"),
         "the weights have no 'model.layers.2.mlp.shared_expert_gate.weight' (the model's "
         "layers.2.moe.shared_gate.weight)"),
    ]
    expect_refusals(bin_dir, work, qwen2_moe, hf_weights(qwen2_moe["config"], False, torch.float32, seed=5),
                    qwen2_moe_cases, failures)
    # OLMoE's clamp of q, k and v (clip_qkv), which its published models leave null.
    olmoe = MODELS["olmoe-bf16"]
    expect_refusals(bin_dir, work, olmoe, hf_weights(olmoe["config"], False, torch.float32, seed=5),
                    [("olmoe-clip-qkv", {"clip_qkv": 8.0}, None,
                      "clamping q, k and v (OLMoE's clip_qkv) is not supported"),
                     # A classifier transformers does not have (OLMoE's modeling code defines none).
                     ("olmoe-classifier", {"architectures": ["OlmoeForSequenceClassification"],
                                           "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}, None,
                      "architecture OlmoeForSequenceClassification is not supported (supported: LlamaForCausalLM")],
                    failures)
    # GraniteMoE's fused experts: an input_linear without each expert's up rows (as long as the gate
    # alone), the router under Mixtral's name, a null multiplier.
    granitemoe = MODELS["granitemoe-bf16"]
    input_linear = "model.layers.1.block_sparse_moe.input_linear.weight"
    granitemoe_cases = [
        ("granitemoe-input-linear", {}, lambda w: w.update({input_linear: w[input_linear][:, :32]}),
         "'" + input_linear + "' is F32 [4,32,64] but the model's layers.1.moe.gate.weight needs [4,64,64]"),
        ("granitemoe-router-name", {}, lambda w: w.update({"model.layers.0.block_sparse_moe.gate.weight": w.pop(
            "model.layers.0.block_sparse_moe.router.layer.weight")}),
         "the weights have no 'model.layers.0.block_sparse_moe.router.layer.weight' (the model's "
         "layers.0.moe.router.weight)"),
        ("granitemoe-null-multiplier", {"residual_multiplier": None}, None,
         "'residual_multiplier' is null: Granite's multipliers are numbers"),
    ]
    expect_refusals(bin_dir, work, granitemoe, hf_weights(granitemoe["config"], False, torch.float32, seed=5),
                    granitemoe_cases, failures)
    # Granite 4.0's: a Mamba-2 layer (its -h- hybrids), no layer_types (every layer Mamba-2 then),
    # experts beside the shared MLP, another position embedding.
    granite4 = MODELS["granite4-f32"]
    granite4_cases = [
        ("granite4-mamba", {"layer_types": ["mamba", "attention"]}, None,
         "'layer_types' names \"mamba\" for layer 0: Granite 4.0's Mamba-2 layers (its -h- hybrids) are not supported"),
        ("granite4-no-layer-types", {"layer_types": None}, None,
         "no 'layer_types': GraniteMoeHybridConfig then makes every layer Mamba-2"),
        ("granite4-experts", {"num_local_experts": 8}, None,
         "'num_local_experts' is 8: experts beside Granite 4.0's shared MLP are not supported yet"),
        ("granite4-alibi", {"position_embedding_type": "alibi"}, None,
         "'position_embedding_type' is alibi: \"rope\" (the rotary embedding) or \"nope\""),
    ]
    expect_refusals(bin_dir, work, granite4, hf_weights(granite4["config"], False, torch.float32, seed=5),
                    granite4_cases, failures)
    # GLM-4.5's: no shared expert, more dense layers than layers, groups that do not split the experts,
    # the router's choice bias missing, a prediction layer the config does not name, its classifier
    # (transformers has none); the load-balancing loss, which transformers never adds to its router's.
    glm = MODELS["glm4-moe-bf16"]
    glm_weights = hf_weights(glm["config"], False, torch.float32, seed=5)
    glm_cases = [
        ("glm4-moe-no-shared", {"n_shared_experts": 0}, None, "'n_shared_experts' is 0"),
        ("glm4-moe-dense", {"first_k_dense_replace": 4}, None, "'first_k_dense_replace' 4 is more than the 3 layers"),
        ("glm4-moe-groups", {"n_group": 3}, None,
         "router_groups (n_group) 3 must lie in [2, 64] and split the 8 experts into equal groups of two or more"),
        ("glm4-moe-score-bias", {}, lambda w: w.pop("model.layers.1.mlp.gate.e_score_correction_bias"),
         "the weights have no 'model.layers.1.mlp.gate.e_score_correction_bias' (the model's "
         "layers.1.moe.router.score_bias)"),
        ("glm4-moe-prediction-layer", {"num_nextn_predict_layers": 0}, None,
         "the weights hold 'model.layers.3.eh_proj.weight', which the Glm4MoeForCausalLM layout mtc reads has no "
         "place for"),
        ("glm4-moe-classifier", {"architectures": ["Glm4MoeForSequenceClassification"],
                                 "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}, None,
         "architecture Glm4MoeForSequenceClassification is not supported"),
    ]
    expect_refusals(bin_dir, work, glm, glm_weights, glm_cases, failures)
    # DeepSeek-V3's: DeepSeek-V2's softmax routing, FP8 weights, attention biases, a head_dim that is not
    # the rotated part's, values wider than the heads' q and k.
    deepseek = MODELS["deepseek-v3-f32"]
    deepseek_cases = [
        ("deepseek-softmax", {"scoring_func": "softmax", "topk_method": "group_limited_greedy"}, None,
         "'scoring_func' and 'topk_method' name DeepSeek-V2's softmax routing"),
        ("deepseek-bias", {"attention_bias": True}, None, "biases on DeepSeek's latent attention are not supported"),
        ("deepseek-head-dim", {"head_dim": 16}, None, "'head_dim' is not 'qk_rope_head_dim'"),
        ("deepseek-wide-values", {"v_head_dim": 32}, None,
         "the latent attention's values (v_head_dim 32) must be no wider than its heads' q and k (24)"),
    ]
    expect_refusals(bin_dir, work, deepseek, hf_weights(deepseek["config"], False, torch.float32, seed=5),
                    deepseek_cases, failures)
    # DeepSeek-V2's: a renormalisation transformers and DeepSeek's code disagree on, DeepSeek-V3's routing
    # or scores under V2's name, pairs not interleaved, groups that do not split the experts or hold
    # fewer than a token chooses.
    deepseek_v2 = MODELS["deepseek-v2-bf16"]
    deepseek_v2_cases = [
        ("deepseek-v2-renormalised", {"norm_topk_prob": True}, None,
         "transformers' DeepseekV2 ignores it while DeepSeek's own code renormalises"),
        ("deepseek-v2-noaux", {"topk_method": "noaux_tc"}, None, "DeepSeek-V2 chooses by \"greedy\" or"),
        ("deepseek-v2-sigmoid", {"scoring_func": "sigmoid"}, None, "DeepSeek-V2's router scores by a softmax"),
        ("deepseek-v2-halves", {"rope_interleave": False}, None, "DeepSeek-V2 always turns interleaved pairs"),
        ("deepseek-v2-groups", {"n_group": 3}, None, "router_groups (n_group) 3 must lie in [2, 64] and split"),
        ("deepseek-v2-few", {"topk_group": 1, "num_experts_per_tok": 3}, None,
         "router_groups_chosen (topk_group) 1 groups of 2 experts hold fewer than the 3 each token chooses"),
    ]
    expect_refusals(bin_dir, work, deepseek_v2, hf_weights(deepseek_v2["config"], False, torch.float32, seed=5),
                    deepseek_v2_cases, failures)
    # Ernie 4.5's mixture: transformers' balance loss (which counts choices without the bias), a
    # clamp of the weights' sum mtc does not make, the original code's sigmoid gate (which transformers
    # ignores), the choice bias missing, a prediction weight outside model.mtp_*.
    # OLMo 3's: its rotary base absent (the config classes' defaults differ), one rope_parameters
    # scaling every layer (transformers 5 before #45945 and OLMo-core disagree on it), a base nowhere
    # in the per-type settings, a null window, layer types of another length.
    olmo3 = MODELS["olmo3-bf16"]
    olmo3_cases = [
        ("olmo3-no-theta", {"rope_theta": None}, None,
         "no 'rope_theta': OLMo 3's default rotary base is 10,000 in transformers 4 and 5.0-5.2, 500,000 in later"),
        ("olmo3-flat-yarn", {"rope_scaling": None, "rope_parameters": dict(olmo3["config"]["rope_scaling"])}, None,
         "'rope_parameters' scales the rotary embedding of every layer alike"),
        ("olmo3-per-type-no-theta", {"rope_theta": None, "rope_scaling": None, "rope_parameters": {
            "full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}}, None,
         "no 'rope_theta' here nor the config's rope_theta"),
        ("olmo3-window-null", {"sliding_window": None}, None, "layers slide but 'sliding_window' is null"),
        ("olmo3-layer-types", {"layer_types": ["sliding_attention"] * 3}, None,
         "'layer_types' is not a list of the 4 layers' attention"),
    ]
    expect_refusals(bin_dir, work, olmo3, hf_weights(olmo3["config"], False, torch.float32, seed=5), olmo3_cases,
                    failures)
    # GLM-4's: its fused MLP's rows not gate's and up's, a norm after the MLP missing.
    glm4 = MODELS["glm4-bf16"]
    glm4_cases = [
        ("glm4-gate-up-shape", {}, lambda w: w.update({"model.layers.1.mlp.gate_up_proj.weight": torch.zeros(100, 64)}),
         "model.layers.1.mlp.gate_up_proj.weight"),
        ("glm4-post-mlp-norm", {}, lambda w: w.pop("model.layers.0.post_mlp_layernorm.weight"),
         "model.layers.0.post_mlp_layernorm.weight"),
    ]
    expect_refusals(bin_dir, work, glm4, hf_weights(glm4["config"], False, torch.float32, seed=5), glm4_cases, failures)
    # Exaone 4's: layers its config class cannot derive (a null window, a pattern of letters, each
    # without layer_types: transformers fails), a layer sliding with no window, biases transformers never
    # builds.
    exaone4 = MODELS["exaone4-bf16"]
    exaone4_cases = [
        ("exaone4-null-window", {"sliding_window": None, "layer_types": None}, None,
         "no 'layer_types' beside a null 'sliding_window': Exaone4Config cannot derive which layers slide"),
        ("exaone4-letter-pattern", {"layer_types": None}, None,
         "no 'layer_types' beside 'sliding_window_pattern' \"LLLG\": Exaone4Config cannot derive"),
        ("exaone4-slides-no-window", {"sliding_window": None}, None, "layers slide but 'sliding_window' is null"),
        ("exaone4-bias", {"attention_bias": True}, None, "Exaone 4's projections have no biases in transformers"),
    ]
    expect_refusals(bin_dir, work, exaone4, hf_weights(exaone4["config"], False, torch.float32, seed=5),
                    exaone4_cases, failures)
    ernie = MODELS["ernie4_5-moe-bf16"]
    ernie_cases = [
        ("ernie-moe-router-logits", {"output_router_logits": True}, None,
         "'output_router_logits' is true: transformers' load-balancing loss for Ernie 4.5 counts each token's top k "
         "without the correction bias"),
        ("ernie-moe-norm-min", {"moe_norm_min": 1e-6}, None, "'moe_norm_min' 1e-06 is above 1e-12"),
        ("ernie-moe-gate-act", {"moe_gate_act": "sigmoid"}, None, "transformers' Ernie 4.5 routes by a softmax"),
        ("ernie-moe-end", {"moe_layer_end_index": -2}, None, "'moe_layer_end_index' is -2: a layer index, or -1"),
        ("ernie-moe-score-bias", {}, lambda w: w.pop("model.layers.2.mlp.moe_statics.e_score_correction_bias"),
         "the weights have no 'model.layers.2.mlp.moe_statics.e_score_correction_bias' (the model's "
         "layers.2.moe.router.score_bias)"),
        ("ernie-moe-bias-shape", {},
         lambda w: w.update({"model.layers.1.mlp.moe_statics.e_score_correction_bias": torch.zeros(8)}),
         "model.layers.1.mlp.moe_statics.e_score_correction_bias"),
        ("ernie-moe-stray", {}, lambda w: w.update({"model.layers.3.mtp_proj.weight": torch.zeros(2)}),
         "the weights hold 'model.layers.3.mtp_proj.weight', which the Ernie4_5_MoeForCausalLM layout mtc reads has no "
         "place for"),
    ]
    expect_refusals(bin_dir, work, ernie, hf_weights(ernie["config"], False, torch.float32, seed=5), ernie_cases,
                    failures)
    err = mtc_error(bin_dir, os.path.join(work, "ernie4_5-moe-bf16"), "--router-aux-loss", "0.01")
    if "--router-aux-loss: this router chooses with a frozen bias" not in err:
        failures.append(f"Ernie 4.5's mixture with --router-aux-loss: wanted a refusal, got: {err.strip()}")
    # Its MoE layers by Ernie4_5_MoeDecoderLayer's rule: of 6, from layer 1 to layer 4, every second
    # (layers 1 and 3); its config alone.
    folder = os.path.join(work, "ernie-moe-layers")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(ernie["config"], architectures=[ernie["architecture"]], num_hidden_layers=6,
                       moe_layer_end_index=4, moe_layer_interval=2), f)
    out = subprocess.run([f"{bin_dir}/mtc", folder, "--no-weights", "--batch", "2", "--seq", "16", "-o",
                          folder + ".plan"], capture_output=True, text=True)
    if out.returncode != 0 or "in 2 of 6 layers" not in out.stdout or "chosen with a frozen bias" not in out.stdout:
        failures.append(f"Ernie 4.5's MoE layers 1 and 3 of 6: exit {out.returncode}: {out.stdout}{out.stderr}")
    err = mtc_error(bin_dir, os.path.join(work, "glm4-moe-bf16"), "--router-aux-loss", "0.01")
    if "--router-aux-loss: the sigmoid router" not in err:
        failures.append(f"GLM-4.5 with --router-aux-loss: wanted a refusal, got: {err.strip()}")
    # gpt-oss with a null rope_scaling: transformers 5 applies its YaRN (x 32 from 4,096 tokens),
    # older versions none: ambiguous.
    oss = MODELS["gpt-oss-bf16"]
    oss_cases = [
        ("gpt-oss-rope-null", {"rope_parameters": None, "rope_scaling": None}, None,
         "'rope_scaling' is null, which transformers 5 reads as gpt-oss's YaRN"),
    ]
    expect_refusals(bin_dir, work, oss, hf_weights(oss["config"], False, torch.float32, seed=5), oss_cases, failures)
    # Phi-3's: LongRoPE without a factor for each pair, a part of each head that is no whole pair,
    # two original contexts, dropout, biases, a fused tensor of the wrong length (k and v as long as q).
    phi3 = MODELS["phi3-bf16"]
    phi3_weights = hf_weights(phi3["config"], False, torch.float32, seed=5)
    phi3_cases = [
        ("phi3-longrope-pairs", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 7,
                                                  "long_factor": [2.0] * 7}},
         None, "longrope needs a short and a long factor for each of the rotation's 8 pairs"),
        ("phi3-longrope-factor", {"rope_scaling": {"type": "su", "short_factor": [1.0] * 8,
                                                   "long_factor": [2.0] * 7 + [-1.0]}},
         None, "'rope_scaling': 'long_factor' holds -1.0, not a positive number"),
        ("phi3-longrope-original", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                     "long_factor": [2.0] * 8, "original_max_position_embeddings": 32}},
         None, "the rotary settings' 'original_max_position_embeddings' 32 is not 64 (the config's own), which "
         "transformers uses"),
        ("phi3-longrope-factor-ratio", {"rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8,
                                                         "long_factor": [2.0] * 8, "factor": 2.0}},
         None, "longrope's 'factor' 2 is not max_position_embeddings / original_max_position_embeddings = 1"),
        ("phi3-partial-twice", {"partial_rotary_factor": 0.5,
                                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                    "partial_rotary_factor": 0.75}, "rope_scaling": None,
                                "rope_theta": None},
         None, "'partial_rotary_factor' is 0.5 here but 0.75 in the rotary settings"),
        ("phi3-partial-rotary", {"partial_rotary_factor": 0.7}, None,
         "'partial_rotary_factor' 0.7 turns 11 of each head's 16 elements: it must give a positive even number"),
        ("phi3-partial-huge", {"partial_rotary_factor": 1e300}, None, "'partial_rotary_factor' 1e+300 is above 1"),
        ("phi3-dropout", {"resid_pdrop": 0.1}, None, "'resid_pdrop' is 0.1: dropout is not supported"),
        ("phi3-bias", {"attention_bias": True}, None, "'attention_bias' is true: Phi-3's projections have no biases"),
        ("phi3-qkv-shape", {}, lambda w: w.update({"model.layers.1.self_attn.qkv_proj.weight": torch.zeros(192, 64)}),
         "'model.layers.1.self_attn.qkv_proj.weight' is F32 [192,64] but the model's layers.1.attn.q.weight needs "
         "[128,64]"),
    ]
    expect_refusals(bin_dir, work, phi3, phi3_weights, phi3_cases, failures)
    # Gemma 3's: a softcap of 0 (transformers would divide by it), a scaled local rotary embedding,
    # layer types against the pattern, transformers 5's rotary settings without the sliding layers'.
    gemma = MODELS["gemma3-bf16"]
    gemma_cases = [
        ("gemma-softcap-zero", {"final_logit_softcapping": 0.0}, None,
         "'final_logit_softcapping' is not a positive number"),
        ("gemma-local-scaled", {"rope_theta": None, "rope_local_base_freq": None, "rope_scaling": None,
                                "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                                    "sliding_attention": {"rope_type": "linear", "factor": 2.0}}},
         None, "the sliding layers' rotary embedding is scaled"),
        ("gemma-no-local", {"rope_theta": None, "rope_local_base_freq": None, "rope_scaling": None,
                            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}}},
         None, "no 'sliding_attention' object: Gemma 3's rotary settings are given per layer type"),
        ("gemma-theta-twice", {"rope_scaling": None, "rope_local_base_freq": 20000.0,
                               "rope_parameters": {"full_attention": {"rope_type": "default"},
                                                   "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}},
         None, "'rope_theta' is 10000 but the config's rope_local_base_freq is 20000: the folder contradicts itself"),
    ]
    expect_refusals(bin_dir, work, gemma, hf_weights(gemma["config"], False, torch.float32, seed=5), gemma_cases,
                    failures)
    # Gemma 2's: bidirectional attention (transformers 5's key), a null score scalar (transformers
    # fails), a cap of 0 (it would divide by it), a q_norm it has no place for.
    gemma2 = MODELS["gemma2-f32"]
    gemma2_cases = [
        ("gemma2-bidirectional", {"use_bidirectional_attention": True}, None,
         "'use_bidirectional_attention' is true: bidirectional attention is not supported"),
        ("gemma2-scalar-null", {"query_pre_attn_scalar": None}, None, "'query_pre_attn_scalar' is null"),
        ("gemma2-cap-zero", {"attn_logit_softcapping": 0}, None, "'attn_logit_softcapping' is not a positive number"),
        ("gemma2-q-norm", {}, lambda w: w.update({"model.layers.0.self_attn.q_norm.weight": torch.zeros(32)}),
         "model.layers.0.self_attn.q_norm.weight"),
    ]
    expect_refusals(bin_dir, work, gemma2, hf_weights(gemma2["config"], False, torch.float32, seed=5), gemma2_cases,
                    failures)
    # Gemma 1's: an activation other than GELU's tanh form in either key (hidden_activation "gelu" is
    # exact GELU in transformers 4.39-4.47), Gemma 2's keys it does not have, Gemma 2's norms.
    gemma1 = MODELS["gemma-f32"]
    gemma1_cases = [
        ("gemma-activation-exact", {"hidden_activation": "gelu"}, None,
         "'hidden_activation' is \"gelu\": Gemma's MLP is GeGLU with GELU's tanh form"),
        ("gemma-act-silu", {"hidden_act": "silu"}, None, "'hidden_act' is \"silu\": Gemma's MLP is GeGLU"),
        ("gemma-softcap", {"attn_logit_softcapping": 50.0}, None, "mtc does not know 'attn_logit_softcapping'"),
        ("gemma-sandwich", {}, lambda w: w.update({"model.layers.0.pre_feedforward_layernorm.weight": torch.zeros(64)}),
         "model.layers.0.pre_feedforward_layernorm.weight"),
    ]
    expect_refusals(bin_dir, work, gemma1, hf_weights(gemma1["config"], False, torch.float32, seed=5), gemma1_cases,
                    failures)
    gpt2_cases = [  # GPT-2's own: (name, config changes, weight changes, what the error must say)
        ("gpt2-relu", {"activation_function": "relu"}, None, "'activation_function' is relu"),
        ("gpt2-cross", {"add_cross_attention": True}, None, "'add_cross_attention' is true"),
        ("gpt2-c_attn", {}, lambda w: w.update({"transformer.h.0.attn.c_attn.weight": torch.zeros(64, 64)}),
         "'transformer.h.0.attn.c_attn.weight' is F32 [64,64] but the model's blocks.0.attn.q.weight needs [64,192]"),
    ]
    expect_refusals(bin_dir, work, GPT2, gpt2_weights(GPT2["config"], seed=5), gpt2_cases, failures)


def router_aux_loss(bin_dir, work, failures):
    """A mixture of experts' config asking for the router's load-balancing loss
    (output_router_logits, router_aux_loss_coef) trains on it; mtc --router-aux-loss 0 turns it off."""
    moe = MODELS["qwen3-moe-bf16-sharded"]
    folder = os.path.join(work, "moe-aux-loss")
    write_folder(folder, dict(moe, shards=1), hf_weights(moe["config"], False, torch.float32, seed=5),
                 {"output_router_logits": True, "router_aux_loss_coef": 0.02})
    for flags, said in (([], True), (["--router-aux-loss", "0"], False)):
        out = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "16", "-o", folder + ".plan"] + flags,
                             capture_output=True, text=True)
        if out.returncode != 0 or ("load-balancing loss x 0.02 trained on" in out.stdout) != said:
            failures.append(f"output_router_logits with {flags}: exit {out.returncode}, the summary "
                            f"{'does not say' if said else 'says'} it trains on the load-balancing loss: {out.stdout}")
    # Where the config names no coefficient, its config class's: OlmoeConfig's 0.01, GptOssConfig's 0.9.
    for name, coef in (("olmoe-bf16", "0.01"), ("gpt-oss-bf16", "0.9")):
        spec = MODELS[name]
        config = {k: v for k, v in spec["config"].items() if k != "router_aux_loss_coef"}
        folder = os.path.join(work, name + "-aux-default")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(dict(config, architectures=[spec["architecture"]], output_router_logits=True), f)
        out = subprocess.run([f"{bin_dir}/mtc", folder, "--no-weights", "--batch", "2", "--seq", "16", "-o",
                              folder + ".plan"], capture_output=True, text=True)
        if out.returncode != 0 or f"load-balancing loss x {coef} trained on" not in out.stdout:
            failures.append(f"{name} with output_router_logits and no router_aux_loss_coef: exit {out.returncode}, "
                            f"the summary does not name its config class's {coef}: {out.stdout}{out.stderr}")
    # Every layer dense (mlp_only_layers): no router, so no statistics; it compiles and trains.
    dense = dict(moe["config"], mlp_only_layers=[0, 1, 2], output_router_logits=True)
    folder = os.path.join(work, "moe-all-dense")
    write_folder(folder, dict(moe, config=dense, shards=1), hf_weights(dense, False, torch.float32, seed=5))
    out = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "16", "-o", folder + ".plan"],
                         capture_output=True, text=True)
    run = subprocess.run([f"{bin_dir}/mtrun", folder + ".plan", "--data", os.path.join(work, "data.tok"), "--steps", "1",
                          "--log", folder + ".jsonl"], capture_output=True, text=True) if out.returncode == 0 else out
    if run.returncode != 0 or "in 0 of 3 layers" not in out.stdout or "expert_tokens" in open(folder + ".jsonl").read():
        failures.append(f"a Qwen3-MoE config whose layers are all dense: exit {run.returncode}: {out.stdout}{run.stderr}")




def multimodal_trains_as_causal(bin_dir, work, data, flags, name, spec_name, write, causal, exported_ok, failures):
    """The multimodal folders `name`-language_model and `name`-model that `write(folder, body, weights)`
    makes of the `spec_name` folder's weights, in Google's and Mistral's layout ("language_model.model.")
    and transformers 4.52's ("model.language_model."): the summary says the language model is read as
    the `causal` LM, which trains `flags` as the `spec_name` folder does, bit for bit; --export-hf
    writes that LM (`exported_ok(config)`) with its tensors alone. Returns the folders' config."""
    spec = MODELS[spec_name]
    weights = hf_weights(spec["config"], False, spec["dtype"], seed=3)  # the spec_name folder's
    causal_log = os.path.join(work, name + "-causal.jsonl")
    ref.run([f"{bin_dir}/mtrun", os.path.join(work, spec_name + ".plan"), "--data", data, "--log", causal_log] + flags)
    want = [json.loads(line)["loss"] for line in open(causal_log)]
    for body in ("language_model.model.", "model.language_model."):
        folder = os.path.join(work, f"{name}-" + body.split(".")[0])
        config = write(folder, body, weights)
        plan, log = folder + ".plan", folder + ".jsonl"
        summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq),
                                  "-o", plan], capture_output=True, text=True)
        said = f"a {config['architectures'][0]} folder: its language model is read and trained (as {causal})"
        if summary.returncode != 0 or said not in summary.stdout:
            failures.append(f"{folder}: exit {summary.returncode}: {summary.stdout}{summary.stderr}")
            continue
        ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--export-hf", folder + "-out"] + flags)
        got = [json.loads(line)["loss"] for line in open(log)]
        if got != want:
            failures.append(f"{folder}: losses {got}, the {causal} folder's {want}")
        with open(os.path.join(folder + "-out", "config.json")) as f:
            exported = json.load(f)
        names = set(read_hf_safetensors(os.path.join(folder + "-out", "model.safetensors")))
        if exported.get("architectures") != [causal] or not exported_ok(exported) or names != set(weights):
            failures.append(f"{folder}: --export-hf wrote {exported} with tensors {sorted(names ^ set(weights))[:4]} "
                            f"beyond {causal}'s")
    print(f"{name} folders: {len(want)} steps as the {causal} folder's ({want}), exported as it")
    return config


def gemma3_multimodal(bin_dir, work, data, failures):
    """A Gemma3ForConditionalGeneration folder (Gemma 3 4B-27B) in both tensor layouts, Google's
    ("language_model.model.") and transformers 4.52's ("model.language_model."), its text_config
    written sparse as transformers saves it (defaults left out), beside a vision tower: its language
    model trains as the Gemma3ForCausalLM folder of the same weights, bit for bit; --export-hf writes
    that language model (Gemma3ForCausalLM); an unknown top-level key is refused. Its LoRA's
    --export-peft names the modules as transformers 4.52 on loads them (model.language_model.), its
    target_modules an expression that spares the vision tower, and --lora-from reads it back bit for
    bit onto either layout; adapters on the vision tower are refused by name."""
    flags = ["--steps", "3", "--seed", "7", "--print-every", "10"]
    config = multimodal_trains_as_causal(
        bin_dir, work, data, flags, "gemma3-multimodal", "gemma3-bf16", write_gemma3_multimodal, "Gemma3ForCausalLM",
        lambda exported: exported.get("model_type") == "gemma3_text" and exported.get("eos_token_id") == [1, 106],
        failures)
    multimodal_peft(bin_dir, work, data, flags, "gemma3-multimodal", "Gemma3ForCausalLM",
                    "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj", failures)
    # Its config.json alone: mtc --no-weights sizes the plan (the parameters of the folder with
    # weights, the frozen ones taken as bf16 as its torch_dtype says); without the flag, refused.
    alone = os.path.join(work, "gemma3-config-alone")
    os.makedirs(alone, exist_ok=True)
    with open(os.path.join(alone, "config.json"), "w") as f:
        json.dump(config, f)
    sized = subprocess.run([f"{bin_dir}/mtc", alone, "--no-weights", "--batch", "4", "--seq", "32", "--lora", "4",
                            "--precision", "bf16", "-o", alone + ".plan"], capture_output=True, text=True)
    whole = subprocess.run([f"{bin_dir}/mtc", os.path.join(work, "gemma3-bf16"), "--batch", "4", "--seq", "32",
                            "--lora", "4", "--precision", "bf16", "-o", alone + "-whole.plan"], capture_output=True,
                           text=True)
    line = lambda out: [l for l in out.splitlines() if l.strip().startswith("parameters")]  # noqa: E731
    if sized.returncode != 0 or "the folder holds config.json alone" not in sized.stdout or \
            line(sized.stdout) != line(whole.stdout) or "bf16 values as their bf16 copies alone" not in sized.stdout:
        failures.append(f"config.json alone with --no-weights: {sized.stdout}{sized.stderr} vs {line(whole.stdout)}")
    if "mtc --no-weights reads config.json alone" not in mtc_error(bin_dir, alone):
        failures.append(f"config.json alone without --no-weights: {mtc_error(bin_dir, alone)}")
    # A tokenizer with ids past the model's vocabulary that the text does not use (Gemma 3 1B's
    # 262,144 beside its tokenizer's 262,145): the file trains as the one that says the model's
    # vocabulary; an id past it is refused.
    ids = ref.read_tokens(data)[:4096].tolist()
    for vocab, name in ((256, "fits.tok"), (300, "wider.tok")):
        ref.write_tokens(os.path.join(work, name), ids, vocab)
    losses = []
    for name in ("fits.tok", "wider.tok"):
        log = os.path.join(work, name + ".jsonl")
        ref.run([f"{bin_dir}/mtrun", os.path.join(work, "gemma3-bf16.plan"), "--data", os.path.join(work, name),
                 "--log", log] + flags)
        losses.append([json.loads(line)["loss"] for line in open(log)])
    ref.write_tokens(os.path.join(work, "past.tok"), ids + [280], 300)
    past = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "gemma3-bf16.plan"), "--data",
                           os.path.join(work, "past.tok"), "--steps", "1"], capture_output=True, text=True)
    if losses[0] != losses[1] or past.returncode == 0 or "holds token id 280 (its vocab size is 300) but the " \
            "model's vocabulary is 256" not in past.stderr:
        failures.append(f"a tokenizer wider than the model: losses {losses}; an id past it: {past.stderr}")
    bad = dict(config, vision_soft_tokens=16)
    folder = os.path.join(work, "refuse-gemma3-multimodal")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(bad, f)
    err = mtc_error(bin_dir, folder, "--no-weights")
    if "mtc does not know 'vision_soft_tokens'" not in err:
        failures.append(f"multimodal Gemma 3 with an unknown key: {err}")


def gemma3_multimodal_padding(bin_dir, work, failures):
    """The language model of a Gemma3ForConditionalGeneration folder pads as transformers builds it:
    by text_config's pad_token_id (Gemma3TextConfig's 0 where it names none, none where it is null),
    never by the top level's, the multimodal model's own."""
    config = dict(architectures=["Gemma3ForConditionalGeneration"], model_type="gemma3", pad_token_id=5,
                  text_config=dict(MODELS["gemma3-bf16"]["config"]))
    for text_pad, want in (("absent", "{0}"), (None, ""), (7, "{7}")):
        config["text_config"].pop("pad_token_id", None)
        if text_pad != "absent":
            config["text_config"]["pad_token_id"] = text_pad
        folder = os.path.join(work, "gemma3-multimodal-pad")
        dump = plan_listing(bin_dir, folder, folder + ".plan", ["--batch", "1", "--seq", "8"], config)
        grads = [line.split("#")[0] for line in dump.splitlines() if "mt.embedding_grad(" in line]
        shown = re.findall(r"\{[0-9 ]*\}", grads[0]) if len(grads) == 1 else ["several"]
        if (shown[0] if shown else "") != want:
            failures.append(f"gemma3 multimodal, text_config pad_token_id {text_pad}, top level 5: the embedding's "
                            f"gradient is {grads} (want padding {want or 'none'})")
    print("gemma3 multimodal: the language model pads by text_config's pad_token_id (0 where absent), not the top "
          "level's")
    # A final logit cap in text_config: transformers' Gemma3ForConditionalGeneration applies none (its
    # Gemma3ForCausalLM does), so which the folder means is unsure: refused.
    folder = os.path.join(work, "refuse-gemma3-multimodal-cap")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(dict(config, text_config=dict(MODELS["gemma3-bf16"]["config"], final_logit_softcapping=30.0)), f)
    err = mtc_error(bin_dir, folder, "--no-weights")
    if "which transformers' Gemma3ForConditionalGeneration does not apply" not in err:
        failures.append(f"gemma3 multimodal with a final logit cap: wanted it refused, got: {err.strip()}")


def mistral3_multimodal(bin_dir, work, data, failures):
    """A Mistral3ForConditionalGeneration folder (Mistral Small 3.1 and 3.2, Magistral Small) in both
    tensor layouts, Mistral's ("language_model.model.") and transformers 4.52's ("model.language_model."),
    its text_config the mistral-window-f32 folder's config (a sliding window; no tie_word_embeddings,
    MistralConfig's false): its language model trains as that MistralForCausalLM folder, bit for
    bit; --export-hf writes that model; LoRA as multimodal_peft checks it. A top level that ties the
    head where text_config does not, a text_config of another kind (Ministral 3's) and an unknown
    top-level key refused by name."""
    flags = ["--steps", "3", "--seed", "7", "--print-every", "10"]
    config = multimodal_trains_as_causal(
        bin_dir, work, data, flags, "mistral3-multimodal", "mistral-window-f32", write_mistral3_multimodal,
        "MistralForCausalLM", lambda exported: exported.get("model_type") == "mistral" and
        exported.get("sliding_window") == 16 and exported.get("tie_word_embeddings") is not True, failures)
    multimodal_peft(bin_dir, work, data, flags, "mistral3-multimodal", "MistralForCausalLM",
                    "vision_tower.transformer.layers.0.attention.q_proj", failures)
    text = config["text_config"]
    for case, bad, words in (
            ("tied", dict(config, tie_word_embeddings=True),
             "'tie_word_embeddings' is true at the top level but the language model's is false (text_config's "
             "default): the folder contradicts itself"),
            ("ministral3", dict(config, text_config=dict(text, model_type="ministral3")),
             "'text_config' is of model_type \"ministral3\": mtc reads a Mistral3ForConditionalGeneration's language "
             "model of model_type \"mistral\" (MistralForCausalLM) alone"),
            ("unknown", dict(config, image_break_token_id=12), "mtc does not know 'image_break_token_id'")):
        folder = os.path.join(work, "refuse-mistral3-" + case)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(bad, f)
        err = mtc_error(bin_dir, folder, "--no-weights")
        if words not in err:
            failures.append(f"mistral3 {case}: wanted it refused with {words!r}, got: {err.strip()}")
    print("mistral3 multimodal: a head tied at one level alone, Ministral 3's text model and an unknown key refused")


def smollm3_interval(bin_dir, work, failures):
    """A SmolLM3 config without no_rope_layers: every no_rope_layer_interval-th layer is NoPE
    (SmolLM3Config's derivation), so of 6 layers, interval 3 turns q and k in 4 and the default 4
    in 5 (counted in forward-only plans: two mt.rope calls a rotating layer)."""
    config = dict(MODELS["smollm3-bf16"]["config"], architectures=["SmolLM3ForCausalLM"], num_hidden_layers=6,
                  layer_types=["full_attention"] * 6)
    config.pop("no_rope_layers")
    for interval, rotating in ((3, 4), (None, 5)):
        config.pop("no_rope_layer_interval", None)
        if interval:
            config["no_rope_layer_interval"] = interval
        folder = os.path.join(work, "smollm3-interval")
        dump = plan_listing(bin_dir, folder, folder + ".plan", ["--batch", "1", "--seq", "8", "--forward-only"], config)
        ropes = sum("mt.rope(" in line for line in dump.splitlines())
        if ropes != 2 * rotating:
            failures.append(f"smollm3 interval {interval}: {ropes} mt.rope calls (want {2 * rotating})")
    print("smollm3: without no_rope_layers, every no_rope_layer_interval-th layer (4 where absent) turns no rotary "
          "embedding")


def multimodal_peft(bin_dir, work, data, flags, name, causal, vision_module, failures):
    """A multimodal model's folders (`name`-model and `name`-language_model, its two layouts) with LoRA:
    --export-peft from either layout writes the same adapters under transformers' loaded names, which
    --lora-from puts back bit for bit on both; adapters on the vision tower (`vision_module`), and the
    same adapters as transformers before 4.52 and the `causal` LM name them, refused by name."""
    folders = [os.path.join(work, f"{name}-{layout}") for layout in ("model", "language_model")]
    with open(os.path.join(folders[0], "config.json")) as f:
        layers = json.load(f)["text_config"]["num_hidden_layers"]
    lora = ["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.|mlp\."]
    trained = []
    for folder in folders:
        ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "-o", folder + "-lora.plan"] + lora)
        ref.run([f"{bin_dir}/mtrun", folder + "-lora.plan", "--data", data, "--lr", "1e-2", "--export",
                 folder + "-lora.safetensors", "--export-peft", folder + "-peft"] + flags)
        trained.append(ref.read_safetensors(folder + "-lora.safetensors"))
        with open(os.path.join(folder + "-peft", "adapter_config.json")) as f:
            targets = json.load(f)["target_modules"]
        keys = set(read_hf_safetensors(os.path.join(folder + "-peft", "adapter_model.safetensors")))
        prefix = "base_model.model.model.language_model.layers."
        if targets != r"model\.language_model\..*\.(down_proj|gate_proj|k_proj|o_proj|q_proj|up_proj|v_proj)" or \
                len(keys) != 2 * 7 * layers or not all(k.startswith(prefix) for k in keys):
            failures.append(f"{folder}: --export-peft wrote target_modules {targets}, keys {sorted(keys)[:2]}")
    if any(not torch.equal(trained[0][k], trained[1][k]) for k in trained[0]):
        failures.append(f"{name} LoRA: the two layouts trained differently")
    for folder in folders:  # the first folder's adapters onto both layouts
        ref.run([f"{bin_dir}/mtc", folder, "--batch", "4", "--seq", "32", "--lora-from", folders[0] + "-peft", "-o",
                 folder + "-from.plan"])
        ref.run([f"{bin_dir}/mtrun", folder + "-from.plan", "--data", data, "--steps", "1", "--lr", "0",
                 "--print-every", "10", "--export", folder + "-from.safetensors"])
        back = ref.read_safetensors(folder + "-from.safetensors")
        differ = [k for k in trained[0] if not torch.equal(trained[0][k], back[k])]
        if differ:
            failures.append(f"{folder}: --lora-from {folders[0]}-peft differs at {differ[:3]}")
    # An adapter with the vision tower's layers too (PEFT's all-linear on the multimodal model).
    vision = os.path.join(work, f"{name}-vision-peft")
    shutil.copytree(folders[0] + "-peft", vision, dirs_exist_ok=True)
    tensors = read_hf_safetensors(os.path.join(vision, "adapter_model.safetensors"))
    key = f"base_model.model.model.{vision_module}.lora_A.weight"
    write_safetensors(os.path.join(vision, "adapter_model.safetensors"), dict(tensors, **{key: torch.zeros(4, 8)}))
    refused = subprocess.run([f"{bin_dir}/mtc", folders[0], "--lora-from", vision, "-o", vision + ".plan"],
                             capture_output=True, text=True)
    if refused.returncode == 0 or "the vision tower's or its projector's, which mtc does not read" not in refused.stderr:
        failures.append(f"{name}: an adapter on the vision tower: exit {refused.returncode}: {refused.stderr}")
    # The same adapters as transformers before 4.52 named them, and as the causal LM's: refused by name.
    for form, (old, new), words in (("older", ("model.language_model.", "language_model.model."), "before 4.52"),
                                    ("causal", ("model.language_model.", "model."), f"an adapter of a {causal}")):
        renamed = os.path.join(work, f"{name}-{form}-peft")
        shutil.copytree(folders[0] + "-peft", renamed, dirs_exist_ok=True)
        write_safetensors(os.path.join(renamed, "adapter_model.safetensors"),
                          {k.replace(old, new, 1): v for k, v in tensors.items()})
        refused = subprocess.run([f"{bin_dir}/mtc", folders[1], "--lora-from", renamed, "-o", renamed + ".plan"],
                                 capture_output=True, text=True)
        if refused.returncode == 0 or words not in refused.stderr:
            failures.append(f"{name}: an adapter of {form} names: exit {refused.returncode}: {refused.stderr}")
    print(f"{name} LoRA: --export-peft under model.language_model. from both layouts, read back bit for bit onto "
          "both; the vision tower's adapters refused")


def gemma3_with_its_tokenizer(bin_dir, work, failures):
    """Gemma 3 1B's vocabulary (262,144) beside its tokenizer's 262,145 ids (the last the special
    <image_soft_token>): chat data from mttok trains (the file's ids fit the model), mtgen takes the
    tokenizer, and a prompt holding that last token is refused by name."""
    spec = dict(MODELS["gemma3-bf16"])
    spec["config"] = dict(spec["config"], vocab_size=262144, hidden_size=32, head_dim=16)
    folder = os.path.join(work, "gemma3-1b-vocab")
    write_folder(folder, spec, hf_weights(spec["config"], False, spec["dtype"], 3))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(GEMMA3_TOKENIZER, name), os.path.join(folder, name))
    os.remove(os.path.join(folder, "chat_template.jinja"))  # the tokenizer_config's own template
    chat = os.path.join(work, "gemma3-chat.jsonl")
    with open(chat, "w") as f:
        for q, a in (("Hi there", "Hello!"), ("Double 2.", "4."), ("Name a colour.", "Blue.")):
            f.write(json.dumps({"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]}) + "\n")
    tok, plan = os.path.join(work, "gemma3-chat.tok"), os.path.join(work, "gemma3-1b-vocab.plan")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", folder, "--chat", chat, "-o", tok])
    ref.run([f"{bin_dir}/mtc", folder, "--batch", "2", "--seq", "24", "-o", plan])
    trained = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", tok, "--rows", "examples", "--steps", "2"],
                             capture_output=True, text=True)
    gen = os.path.join(work, "gemma3-1b-vocab-gen.plan")
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--kv-cache", "--batch", "1", "--seq", "48", "-o", gen])
    replied = subprocess.run([f"{bin_dir}/mtgen", gen, "--tokenizer", folder, "--chat", "Hi", "--max-tokens", "4"],
                             capture_output=True, text=True)
    refused = subprocess.run([f"{bin_dir}/mtgen", gen, "--tokenizer", folder, "--prompt", "a <image_soft_token>",
                              "--max-tokens", "4"], capture_output=True, text=True)
    if trained.returncode != 0 or replied.returncode != 0 or refused.returncode == 0 or \
            "prompt token 262144 is past the model's vocabulary of 262144" not in refused.stderr:
        failures.append(f"Gemma 3 with its tokenizer: mtrun {trained.returncode} {trained.stderr}; mtgen --chat "
                        f"{replied.returncode} {replied.stderr}; the image token's prompt {refused.returncode} "
                        f"{refused.stderr}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = ref.make_corpus(bin_dir, work)
    tokens = ref.read_tokens(data)
    failures = []
    for name, spec in MODELS.items():
        cfg = spec["config"]
        gpt2 = spec is GPT2
        folder = os.path.join(work, name)
        weights = (gpt2_weights(cfg, seed=3) if gpt2 else
                   hf_weights(cfg, spec["architecture"] == "Qwen2ForCausalLM", spec["dtype"], seed=3))
        write_folder(folder, spec, dict(weights, **gpt2_buffers(cfg)) if gpt2 else weights)
        plan, log = os.path.join(work, name + ".plan"), os.path.join(work, name + ".jsonl")
        summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq",
                                  str(SCHEDULE.seq), "-o", plan], capture_output=True, text=True, check=True).stdout
        print(summary)
        if gpt2 and "asks for dropout (embd_pdrop 0.1, attn_pdrop 0.1, resid_pdrop 0.1); mtc trains without" \
                not in summary:
            failures.append(f"{name}: the summary does not say that the config's dropout is not applied")
        if gpt2:  # GPT2Config's 0.1 each where the config names none
            default_dropout_named(bin_dir, work, "gpt2", spec, ["embd_pdrop", "attn_pdrop", "resid_pdrop"],
                                  "(embd_pdrop 0.1 by default, attn_pdrop 0.1 by default, resid_pdrop 0.1 by default)",
                                  failures)
        if name == "seed-oss-bf16":
            seed_oss_dropout(bin_dir, work, summary, failures)
        # Exaone 4's full-attention layer without a rotary embedding (its global NoPE), the others sliding.
        if name == "exaone4-bf16" and "8-token windows in 3 of 4 layers, rope scaled (llama3 x 16), no rotary " \
                "embedding in 1 of 4 layers (NoPE)" not in summary:
            failures.append(f"{name}: the summary does not say that 3 layers slide and 1 turns no rotary embedding")
        grads_file = os.path.join(work, name + ".grads.safetensors")
        out = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", data, "--log", log, "--print-every", "10",
                              "--dump-grads", grads_file] + SCHEDULE.mtrun_flags(),
                             capture_output=True, text=True, check=True).stdout
        if f"initial weights: {plan[:-5]}.safetensors" not in out:
            failures.append(f"{name}: mtrun did not start from the weights beside the plan:\n{out}")
        mt_losses = [json.loads(line)["loss"] for line in open(log)]
        params = {k: v.float().requires_grad_() for k, v in weights.items()}
        logits_of = gpt2_logits if gpt2 else hf_logits
        torch_grads = {}

        def keep_first_grads(step):
            if step == 1:
                torch_grads.update({k: v.grad.clone() for k, v in params.items() if v.grad is not None})
        torch_losses = ref.torch_train(params, lambda x: logits_of(params, cfg, x), tokens, SCHEDULE,
                                       after_backward=keep_first_grads)
        worst = ref.compare_losses(mt_losses, torch_losses, LOSS_TOL, failures)
        # The first step's gradients, ours in Hugging Face's layout, tensor by tensor.
        ours = ref.read_safetensors(grads_file)
        ours = hf_layout(ours, spec)
        if set(ours) != set(torch_grads):
            failures.append(f"{name}: gradients of {sorted(set(ours) ^ set(torch_grads))[:4]} on one side only")
        grad_errs = {k: ref.rel_err(ours[k], torch_grads[k]) for k in ours if k in torch_grads}
        worst_grad = max(grad_errs, key=grad_errs.get)
        if grad_errs[worst_grad] > GRAD_TOL:
            failures.append(f"{name}: the gradient of {worst_grad} is {grad_errs[worst_grad]:.2e} from the "
                            f"transformers-style model's (tolerance {GRAD_TOL:.0e})")
        print(f"{name}: first step's gradients of {len(grad_errs)} tensors within {grad_errs[worst_grad]:.1e} "
              f"(worst {worst_grad})")
        if name == "phi3-bf16":
            padded_embedding_gradients(bin_dir, work, folder, cfg, data, tokens, ours, failures)
        if name == "granite-f32":
            granite_heads(bin_dir, work, folder, summary, failures)
        if name == "gemma2-f32":
            gemma2_heads(bin_dir, work, folder, data, mt_losses, failures)
        if name == "gemma-f32":
            gemma_activation(bin_dir, work, folder, summary, failures)
        if name == "olmo3-bf16":
            olmo3_sliding_rotary(cfg, weights, tokens, failures)
        if name == "glm4-moe-bf16" and "the checkpoint's 1 multi-token prediction layer (model.layers.3) is not " \
                "read, as transformers reads none; --export-hf writes none" not in summary:
            failures.append(f"{name}: the summary does not say that the prediction layer is not read")
        if name == "ernie4_5-moe-bf16" and "the checkpoint's multi-token prediction weights (model.mtp_*) are not " \
                "read, as transformers reads none" not in summary:
            failures.append(f"{name}: the summary does not say that the prediction weights are not read")
        print(f"{name}: 20 steps, first loss {mt_losses[0]:.4f} last {mt_losses[-1]:.4f}, worst relative "
              f"difference to the transformers-style model {worst:.2e}")
        check_export(bin_dir, work, name, spec, plan, data, tokens, failures)
    # The folder a plan was compiled from gone by the time of the export: the weights are still
    # exported, and the export says its tokenizer files could not be carried over.
    source = os.path.join(work, "llama-bf16-sharded")
    os.rename(source, source + ".moved")
    out = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "llama-bf16-sharded.plan"), "--data", data, "--steps",
                          "1", "--export-hf", os.path.join(work, "gone-out")], capture_output=True, text=True)
    os.rename(source + ".moved", source)
    if out.returncode != 0 or "the tokenizer files were not copied: " + source + ", the folder the model came from, " \
            "is gone" not in out.stdout or not os.path.exists(os.path.join(work, "gone-out", "model.safetensors")):
        failures.append(f"export with the source folder gone: exit {out.returncode}: {out.stdout}{out.stderr}")
    # --batch auto sizes a folder's model like a built-in one (issue 17).
    auto = subprocess.run([f"{bin_dir}/mtc", os.path.join(work, "llama-bf16-sharded"), "--batch", "auto",
                           "--device-mem", "4MiB", "--seq", "32", "-o", os.path.join(work, "auto.plan")],
                          capture_output=True, text=True)
    if auto.returncode != 0 or "the largest that fits --device-mem" not in auto.stdout:
        failures.append(f"--batch auto on a folder: exit {auto.returncode}: {auto.stdout}{auto.stderr}")
    # A scaled rotary embedding in a decode plan (mt.rope_at with YaRN's frequencies), and Gemma 3's
    # (each layer's base and scaling, q scaled, norms of 1 + weight), and Phi-4-mini's (part of each
    # head, LongRoPE), and Gemma 2's softcapped scores (mt.cached_attention's cap as mt.attention's):
    # greedy text over the key/value cache = the window plan's (mt.rope); Qwen2-MoE's shared expert
    # one token at a time as over the window. Gemma's
    # trained 100 steps first, so that its text varies (past its 8-token windows).
    gemma_trained, gemma2_trained = os.path.join(work, "gemma3-trained"), os.path.join(work, "gemma2-trained")
    for plan, trained in (("gemma3-bf16.plan", gemma_trained), ("gemma2-f32.plan", gemma2_trained)):
        ref.run([f"{bin_dir}/mtrun", os.path.join(work, plan), "--data", data, "--steps", "100", "--lr", "1e-2",
                 "--print-every", "100", "--export-hf", trained])
    # Phi-4-mini's within its original context of 16 tokens: the decode plan picks LongRoPE's short
    # factors by its positions, the window plan of 16 by its length.
    for model, folder, seq, max_tokens in (("yarn-rope-f32", os.path.join(work, "yarn-rope-f32"), "64", "40"),
                                       ("qwen2-moe-bf16", os.path.join(work, "qwen2-moe-bf16"), "64", "40"),
                                       ("glm4-moe-bf16", os.path.join(work, "glm4-moe-bf16"), "64", "40"),
                                       ("deepseek-v3-f32", os.path.join(work, "deepseek-v3-f32"), "64", "40"),
                                       ("deepseek-v2-bf16", os.path.join(work, "deepseek-v2-bf16"), "64", "40"),
                                       ("ernie4_5-bf16", os.path.join(work, "ernie4_5-bf16"), "64", "40"),
                                       ("ernie4_5-moe-bf16", os.path.join(work, "ernie4_5-moe-bf16"), "64", "40"),
                                       ("olmo3-bf16", os.path.join(work, "olmo3-bf16"), "64", "40"),
                                       ("glm4-bf16", os.path.join(work, "glm4-bf16"), "64", "40"),
                                       ("exaone4-bf16", os.path.join(work, "exaone4-bf16"), "64", "40"),
                                       ("gemma3-bf16", gemma_trained, "64", "40"),
                                       ("gemma2-f32", gemma2_trained, "64", "40"),
                                       ("phi3-longrope-f32", os.path.join(work, "phi3-longrope-f32"), "16", "12")):
        texts = []
        for flags in (["--kv-cache"], []):
            plan = os.path.join(work, model + "-gen" + ("-kv" if flags else "") + ".plan")
            subprocess.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq",
                            seq] + flags + ["-o", plan], capture_output=True, check=True)
            texts.append(subprocess.run([f"{bin_dir}/mtgen", plan, "--prompt", "Q: ", "--greedy", "--max-tokens",
                                         max_tokens], capture_output=True, check=True).stdout)
        if texts[0] != texts[1] or not texts[0]:
            failures.append(f"{model}: the kv-cache plan's greedy text {texts[0]!r} differs from the window's "
                            f"{texts[1]!r}")
    refusals(bin_dir, work, failures)
    router_aux_loss(bin_dir, work, failures)
    gemma3_multimodal(bin_dir, work, data, failures)
    gemma3_multimodal_padding(bin_dir, work, failures)
    mistral3_multimodal(bin_dir, work, data, failures)
    smollm3_interval(bin_dir, work, failures)
    olmo3_rotary_forms(bin_dir, work, failures)
    exaone4_layer_forms(bin_dir, work, failures)
    class_defaults(bin_dir, work, failures)
    gemma3_with_its_tokenizer(bin_dir, work, failures)
    ref.finish("hf_import", failures)


if __name__ == "__main__":
    main()
