"""Quantized Hugging Face checkpoints in (quantization_config), each dequantized to the fp32 master
on import: gpt-oss's official MXFP4 experts, and fine-grained FP8 (DeepSeek-V3's, Kimi K2's,
Qwen3's -FP8: every linear weight E4M3 beside `<name>_scale_inv`, one f32 scale per
weight_block_size block) and compressed-tensors' FP8 (llm-compressor's -FP8-dynamic: E4M3 beside
`<name>_scale`, per tensor, channel, group or block, products in the scales' type). The weights beside the plan must equal the reference dequantization bit
for bit (transformers' own arithmetic, transcribed here since Debian's torch 1.13 has no float8),
the first loss the transformers-style twin's on those weights; --export-hf writes the weights
without quantization_config and compiles back to them bit for bit. Then the refusals: broken
codes, scales and settings named.

usage: /usr/bin/python3 tests/e2e/hf_quantized.py BIN_DIR WORK_DIR
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from hf_folders import MODELS, expect_refusals, hf_layout, hf_weights, write_folder  # noqa: E402
from hf_import import SCHEDULE  # noqa: E402
from hf_twins import hf_logits  # noqa: E402

torch.set_num_threads(2)


def e4m3_value(code):
    """float8_e4m3fn's value of a code: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
    infinities, 0x7f and 0xff NaN."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0x0F, code & 0x07
    if exponent == 0x0F and mantissa == 0x07:
        return math.nan
    return sign * (mantissa / 8 * 2.0 ** -6 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7))


E4M3 = torch.tensor([e4m3_value(c) for c in range(256)])


def to_e4m3(x):
    """The E4M3 codes nearest x (|x| at most 448, as a block scaled by its amax / 448 is)."""
    magnitudes = E4M3[:0x7F]  # codes 0..0x7e in increasing order
    a = x.abs()
    hi = torch.bucketize(a, magnitudes).clamp(min=1, max=0x7E)
    lo = hi - 1
    code = torch.where(a - magnitudes[lo] <= magnitudes[hi] - a, lo, hi)
    return (code | ((x < 0).long() << 7)).to(torch.uint8)


def blockwise(scales, shape, block):
    """Each element's scale: a scale per (block[0], block[1]) block spread over them, the short
    last blocks of an axis cut."""
    return scales.repeat_interleave(block[0], 0)[:shape[0]].repeat_interleave(block[1], 1)[:, :shape[1]]


def quantize_fp8(w, block):
    """`w` (rows, cols) as transformers' Fp8Quantize stores it: a block's scale its amax / 448 (f32),
    its values the nearest E4M3 codes of w / scale. Returns (codes, scales, the dequantized weight as
    transformers' Fp8Dequantize computes it: each code's value times its scale in f32)."""
    w = w.float()
    rows, cols = w.shape
    scales = torch.ones(-(-rows // block[0]), -(-cols // block[1]))
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            amax = w[i * block[0]:(i + 1) * block[0], j * block[1]:(j + 1) * block[1]].abs().max()
            if amax > 0:
                scales[i, j] = amax / 448
    spread = blockwise(scales, w.shape, block)
    codes = to_e4m3(w / spread)
    return codes, scales, E4M3[codes.long()] * spread


def fp8_checkpoint(weights, block):
    """`weights` as a fine-grained FP8 checkpoint stores them: every linear layer's weight (each
    ..._proj.weight; not the router, embedding, head or norms) as E4M3 codes beside its
    `_scale_inv`. Returns (the checkpoint's tensors, the dequantized weights by name, the codes'
    dtype names for write_folder)."""
    stored, dequantized, dtypes = {}, {}, {}
    for name, w in weights.items():
        if not re.search(r"_proj(_with_mqa)?\.weight$", name):
            stored[name] = w
            continue
        stored[name], stored[name + "_scale_inv"], dequantized[name] = quantize_fp8(w, block)
        dtypes[name] = "F8_E4M3"
    return stored, dequantized, dtypes


def imported_mismatches(folder, spec, want):
    """The tensors mtc wrote beside the plan (in Hugging Face's layout) that differ from `want`'s,
    and those of `want` it did not write (the prediction layers' aside)."""
    got = hf_layout(ref.read_safetensors(folder + ".safetensors"), spec)
    layers = spec["config"]["num_hidden_layers"]
    skipped = tuple(f"model.layers.{layers + i}." for i in range(spec["config"].get("num_nextn_predict_layers", 0)))
    bad = [k for k, v in got.items() if k not in want or not torch.equal(v, want[k].float())]
    return bad + [k for k in want if k not in got and not k.startswith(skipped)]


def trains_and_exports(bin_dir, folder, params, cfg, data, tokens, label, failures):
    """The folder's plan (compiled beside it) trained a step: its first loss the transformers-style
    model's on the dequantized `params`; --export-hf writes a config without quantization_config
    whose folder compiles back to the exported weights bit for bit. Returns (mtc's loss, the twin's)."""
    log = folder + ".jsonl"
    ref.run([f"{bin_dir}/mtrun", folder + ".plan", "--data", data, "--steps", "1", "--seed", str(SCHEDULE.seed),
             "--log", log, "--export", folder + "-out.safetensors", "--export-hf", folder + "-out"])
    x, y = ref.batch(tokens, 0, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed)
    with torch.no_grad():
        logits = hf_logits(params, cfg, x)
        torch_loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)).item()
    mt_loss = json.loads(open(log).readline())["loss"]
    if abs(mt_loss - torch_loss) > 1e-5 * abs(torch_loss):
        failures.append(f"{label}: first loss {mt_loss} vs the transformers-style model's {torch_loss}")
    with open(os.path.join(folder + "-out", "config.json")) as f:
        if "quantization_config" in json.load(f):
            failures.append(f"{label}: --export-hf kept quantization_config beside dequantized weights")
    ref.run([f"{bin_dir}/mtc", folder + "-out", "--batch", "4", "--seq", "32", "-o", folder + "-again.plan"])
    exported, again = ref.read_safetensors(folder + "-out.safetensors"), ref.read_safetensors(folder + "-again.safetensors")
    if exported.keys() != again.keys() or any(not torch.equal(exported[k], again[k]) for k in exported):
        failures.append(f"{label}: the exported folder does not compile back to the exported weights bit for bit")
    return mt_loss, torch_loss


def dequantized_import(bin_dir, folder, spec, checkpoint, quant, said, label, data, tokens, failures):
    """`checkpoint` (weights as given, the checkpoint's tensors, the dequantized ones, the codes'
    dtype names) written as `folder` with `quant` as its quantization_config: mtc's summary says
    `said`, its weights are the dequantized checkpoint's bit for bit, and it trains and exports as
    trains_and_exports checks. Returns (mtc's first loss, the twin's)."""
    weights, stored, dequantized, dtypes = checkpoint
    write_folder(folder, spec, stored, {"quantization_config": quant}, dtypes)
    summary = subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq),
                              "-o", folder + ".plan"], capture_output=True, text=True, check=True).stdout
    if said not in summary:
        failures.append(f"{label}: the summary does not say the weights were dequantized:\n{summary}")
    params = dict({k: v.float() for k, v in weights.items()}, **dequantized)
    if bad := imported_mismatches(folder, spec, params):
        failures.append(f"{label}: mtc's weights are not the dequantized checkpoint's bit for bit: {bad[:5]}")
    return trains_and_exports(bin_dir, folder, params, spec["config"], data, tokens, label, failures)


def fp8_import(bin_dir, work, data, tokens, failures):
    """DeepSeek-V3 as its published FP8 checkpoint stores it (Moonlight's attention, BF16 in two
    shards, blocks of 16x24 so that rows and columns both end in short blocks, a prediction layer's
    FP8 tensors skipped): mtc's weights are the reference dequantization bit for bit, the summary
    says so, the first loss is the twin's on them, the export compiles back to itself bit for bit,
    and --no-weights sizes the plan from the config and index alone. Then Qwen3-8B-FP8's form
    (weight_block_size absent: 128x128, one short block): the weights bit for bit."""
    spec = MODELS["deepseek-v3-plain-bf16"]
    cfg, block = spec["config"], [16, 24]
    weights = hf_weights(cfg, False, torch.bfloat16, seed=13)
    stored, dequantized, dtypes = fp8_checkpoint(weights, block)
    quant = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": block}
    folder = os.path.join(work, "deepseek-fp8")
    mt_loss, torch_loss = dequantized_import(
        bin_dir, folder, spec, (weights, stored, dequantized, dtypes), quant,
        "FP8 weights (E4M3, a scale per 16x24 block) are dequantized to f32 on import", "fp8", data, tokens, failures)
    # The config and the index alone (a plan sized before the download): the scales placed by name.
    config_alone = folder + "-config"
    os.makedirs(config_alone, exist_ok=True)
    for name in ("config.json", "model.safetensors.index.json"):
        shutil.copy(os.path.join(folder, name), config_alone)
    sized = subprocess.run([f"{bin_dir}/mtc", config_alone, "--no-weights", "-o", config_alone + ".plan"],
                           capture_output=True, text=True)
    if sized.returncode != 0:
        failures.append(f"fp8: --no-weights on the config and index failed: {sized.stderr}")
    print(f"fp8: DeepSeek-V3 dequantized bit for bit; first loss {mt_loss:.6f} vs {torch_loss:.6f}; exported and "
          f"re-imported; sized without weights")

    qwen3 = MODELS["qwen3-bf16"]
    q_weights = hf_weights(qwen3["config"], False, torch.bfloat16, seed=14)
    q_stored, q_dequantized, q_dtypes = fp8_checkpoint(q_weights, [128, 128])
    q_folder = os.path.join(work, "qwen3-fp8")
    write_folder(q_folder, qwen3, q_stored,
                 {"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8"}},
                 q_dtypes)
    ref.run([f"{bin_dir}/mtc", q_folder, "--batch", "4", "--seq", "32", "-o", q_folder + ".plan"])
    if bad := imported_mismatches(q_folder, qwen3, dict({k: v.float() for k, v in q_weights.items()}, **q_dequantized)):
        failures.append(f"fp8: Qwen3's weights are not the dequantized checkpoint's bit for bit: {bad[:5]}")

    o_proj = "model.layers.0.self_attn.o_proj.weight"  # [64, 48]: 4 x 2 blocks of 16x24
    quantized = {"quantization_config": quant}

    def code(w, row, col, value):
        w[o_proj][row, col] = value
    cases = [
        ("fp8-nan", quantized, lambda w: code(w, 3, 5, 0x7F),
         f"'{o_proj}': element [3,5] is an E4M3 NaN (code 0x7f); use a checkpoint without it"),
        ("fp8-inf-scale", quantized, lambda w: w[o_proj + "_scale_inv"].__setitem__((0, 0), math.inf),
         f"'{o_proj}_scale_inv' holds inf at element 0"),
        ("fp8-scale-shape", quantized, lambda w: w.update({o_proj + "_scale_inv": torch.ones(4, 3)}),
         "its scales are [4,3], not the [4,2] that blocks of 16x24 (the config's weight_block_size) of a [64,48] "
         "weight have"),
        ("fp8-no-scales", quantized, lambda w: w.pop(o_proj + "_scale_inv"),
         f"'{o_proj}' is F8_E4M3 [64,48] without its scales"),
        ("fp8-scales-beside-bf16", quantized,
         lambda w: w.update({"model.layers.1.mlp.gate.weight_scale_inv": torch.ones(1, 3)}),
         "'model.layers.1.mlp.gate.weight' is BF16 [8,64] with FP8 scales beside it"),
        ("fp8-fmt", {"quantization_config": dict(quant, fmt="e5m2")}, None, "'fmt' is not e4m3"),
        ("fp8-static", {"quantization_config": dict(quant, activation_scheme="static")}, None,
         "'activation_scheme' is not dynamic"),
        ("fp8-block", {"quantization_config": dict(quant, weight_block_size=[0, 128])}, None,
         "'weight_block_size' is a list of 2 items, not [rows, cols] of whole numbers from 1"),
        ("fp8-unknown-key", {"quantization_config": dict(quant, group_size=64)}, None, "mtc does not know 'group_size'"),
        ("fp8-no-config", {}, None, "_scale_inv', which the DeepseekV3ForCausalLM layout mtc reads has no place for"),
        ("mxfp4-not-gpt-oss", {"quantization_config": {"quant_method": "mxfp4"}}, None, "'quant_method' is \"mxfp4\""),
    ]
    expect_refusals(bin_dir, work, spec, stored, cases, failures, dtypes)


# compressed-tensors' FP8 (llm-compressor's -FP8-dynamic checkpoints): how each kind of linear layer
# of the test's Qwen3-MoE is scaled here — (strategy, scale block as a function of the weight's shape,
# the scales' dtype) — one of each strategy and scale type: the attention's q, k, v per output channel
# in BF16, o_proj one F16 scale for the tensor, the experts per group of 16 columns in BF16, the dense
# MLP per 16x32 block in F32.
COMPRESSED_SCHEMES = [
    (r"self_attn\.[qkv]_proj", "channel", lambda rows, cols: (1, cols), torch.bfloat16),
    (r"self_attn\.o_proj", "tensor", lambda rows, cols: (rows, cols), torch.float16),
    (r"mlp\.experts\.", "group", lambda rows, cols: (1, 16), torch.bfloat16),
    (r"mlp\.(gate|up|down)_proj", "block", lambda rows, cols: (16, 32), torch.float32),
]
COMPRESSED_ARGS = dict(
    channel={}, tensor={}, group=dict(group_size=16), block=dict(block_structure=[16, 32]))


def compressed_config():
    """A quantization_config as llm-compressor writes it: a group per scheme above (their targets and
    the ignore list say how the checkpoint was made; the scales' shapes how it is read)."""
    def group(strategy, args):
        weights = dict(dict(num_bits=8, type="float", symmetric=True, strategy=strategy, dynamic=False,
                            group_size=None, block_structure=None, actorder=None, observer="minmax",
                            observer_kwargs={}), **args)
        return dict(targets=["Linear"], weights=weights, output_activations=None, format="float-quantized",
                    input_activations=dict(num_bits=8, type="float", symmetric=True, strategy="token", dynamic=True,
                                           group_size=None, block_structure=None, actorder=None, observer=None,
                                           observer_kwargs={}))
    return dict(quant_method="compressed-tensors", format="float-quantized", quantization_status="compressed",
                config_groups={f"group_{i}": group(strategy, COMPRESSED_ARGS[strategy])
                               for i, (_, strategy, _, _) in enumerate(COMPRESSED_SCHEMES)},
                ignore=["lm_head", "re:.*mlp.gate$"], kv_cache_scheme=None, global_compression_ratio=None,
                sparsity_config={}, transform_config=None, version="0.12.2")


def compressed_checkpoint(weights):
    """`weights` as compressed-tensors stores them: each linear layer's weight (not the router,
    embedding, head or norms) as E4M3 codes beside its `weight_scale` (amax / 448 per block, in the
    scheme's dtype). Returns (the checkpoint's tensors, the weights as compressed-tensors' dequantize
    computes them — the code cast to the scales' dtype times its scale, in that dtype, torch's own
    arithmetic —, the codes' dtype names)."""
    stored, dequantized, dtypes = {}, {}, {}
    for name, w in weights.items():
        scheme = [s for s in COMPRESSED_SCHEMES if re.search(s[0], name)] if name.endswith("_proj.weight") else []
        if not scheme:
            stored[name] = w
            continue
        _, strategy, block_of, dtype = scheme[0]
        rows, cols = w.shape
        block = block_of(rows, cols)
        scales = torch.ones(rows // block[0], cols // block[1])
        for i in range(scales.shape[0]):
            for j in range(scales.shape[1]):
                amax = w[i * block[0]:(i + 1) * block[0], j * block[1]:(j + 1) * block[1]].float().abs().max()
                scales[i, j] = amax / 448 if amax > 0 else 1.0
        scales = scales.to(dtype)
        spread = blockwise(scales, w.shape, block)
        codes = to_e4m3(w.float() / spread.float())
        stored[name], dtypes[name] = codes, "F8_E4M3"
        stored[name + "_scale"] = scales.reshape(1) if strategy == "tensor" else scales
        dequantized[name] = (E4M3[codes.long()].to(dtype) * spread).float()
    return stored, dequantized, dtypes


def compressed_import(bin_dir, work, data, tokens, failures):
    """Qwen3-MoE as an llm-compressor FP8-dynamic checkpoint stores it (two shards; the scales per
    channel, tensor, group and block, in BF16, F16 and F32): mtc's weights are compressed-tensors'
    dequantization bit for bit, the summary says so, the first loss is the twin's on them and the
    export compiles back to itself bit for bit. Then the refusals."""
    spec = MODELS["qwen3-moe-bf16-sharded"]
    cfg = spec["config"]
    weights = hf_weights(cfg, False, torch.bfloat16, seed=15)
    stored, dequantized, dtypes = compressed_checkpoint(weights)
    quant = compressed_config()
    mt_loss, torch_loss = dequantized_import(
        bin_dir, os.path.join(work, "qwen3-moe-compressed"), spec, (weights, stored, dequantized, dtypes), quant,
        "FP8 weights (compressed-tensors' float-quantized", "compressed", data, tokens, failures)
    print(f"compressed: Qwen3-MoE's FP8 (channel, tensor, group, block) dequantized bit for bit; first loss "
          f"{mt_loss:.6f} vs {torch_loss:.6f}; exported and re-imported")

    o_proj = "model.layers.0.self_attn.o_proj.weight"  # [64, 128], one F16 scale
    quantized = {"quantization_config": quant}

    def group_0(**changes):
        q = json.loads(json.dumps(quant))
        for key, value in changes.items():
            part, _, arg = key.partition("__")
            q["config_groups"]["group_0"][part][arg] = value
        return {"quantization_config": q}

    def past_f16(w):  # 448 x 1000 is past F16's 65504; the other codes 0
        w[o_proj + "_scale"] = torch.tensor([1000.0], dtype=torch.float16)
        w[o_proj].zero_()[2, 7] = 0x7E
    cases = [
        ("ct-static", group_0(input_activations__dynamic=False), None,
         "static activation scales (input_scale) are not read"),
        ("ct-int8", group_0(weights__type="int"), None, "'type' is \"int\": not float"),
        ("ct-asymmetric", group_0(weights__symmetric=False), None, "its zero points (weight_zero_point) are not read"),
        ("ct-actorder", group_0(weights__actorder="group"), None, "an activation order's weight_g_idx is not read"),
        ("ct-unknown-arg", group_0(weights__foo=1), None, "mtc does not know 'foo'"),
        ("ct-format", {"quantization_config": dict(quant, format="pack-quantized")}, None,
         "'format' is \"pack-quantized\", not \"float-quantized\""),
        ("ct-status", {"quantization_config": dict(quant, quantization_status="frozen")}, None,
         "'quantization_status' is \"frozen\", not \"compressed\""),
        ("ct-kv-cache", {"quantization_config": dict(quant, kv_cache_scheme=dict(num_bits=8, type="float"))}, None,
         "its key and value scales (k_scale, v_scale) are not read"),
        ("ct-scale-shape", quantized, lambda w: w.update({o_proj + "_scale": torch.ones(3, dtype=torch.float16)}),
         "its scales are [3], which do not split a [64,128] weight into equal blocks"),
        ("ct-past-f16", quantized, past_f16, f"'{o_proj}': element [2,7] dequantizes past F16's range"),
        ("ct-no-scale", quantized, lambda w: w.pop(o_proj + "_scale"),
         f"'{o_proj}' is F8_E4M3 [64,128] without its scales ('{o_proj}_scale'"),
        ("ct-no-config", {}, None, "_scale', which the Qwen3MoeForCausalLM layout mtc reads has no place for (an FP8 "
         "weight's scales: the config names no compressed-tensors quantization_config"),
    ]
    expect_refusals(bin_dir, work, spec, stored, cases, failures, dtypes)


FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def dequantize_mxfp4(blocks, scales):
    """This test's transcription of transformers' convert_moe_packed_tensors (integrations/mxfp4.py),
    in float32 rather than its default bfloat16 (the values are exact in both): each byte's low
    nibble then its high one, times 2^(scale - 127); (E, out, G, 16) blocks to the (E, in, out)
    weight."""
    lut = torch.tensor(FP4_VALUES)
    E, out, G, B = blocks.shape
    values = torch.empty(E, out, G, 2 * B)
    values[..., 0::2] = lut[(blocks & 0x0F).long()]
    values[..., 1::2] = lut[(blocks >> 4).long()]
    values = torch.ldexp(values, (scales.to(torch.int32) - 127)[..., None].float())
    return values.reshape(E, out, G * 2 * B).transpose(1, 2).contiguous()


def mxfp4_import(bin_dir, work, data, tokens, failures):
    """gpt-oss as its official checkpoints store it: the experts' weights as MXFP4 blocks and
    scales (U8) under quantization_config, the rest BF16. mtc dequantizes them exactly (the
    weights beside the plan equal dequantize_mxfp4's bit for bit); the first loss is the
    transformers-style model's; --export-hf writes the weights and a config without
    quantization_config, which compiles back to the same weights. Then the refusals."""
    spec = MODELS["gpt-oss-bf16"]
    cfg = dict(spec["config"], hidden_size=64, intermediate_size=32)
    weights = hf_weights(cfg, False, torch.bfloat16, seed=11)
    g = torch.Generator().manual_seed(12)
    dequantized = {}
    for l in range(cfg["num_hidden_layers"]):
        for name, (n_in, n_out) in {"gate_up_proj": (64, 64), "down_proj": (32, 64)}.items():
            full = f"model.layers.{l}.mlp.experts.{name}"
            del weights[full]
            blocks = torch.randint(0, 256, (4, n_out, n_in // 32, 16), generator=g, dtype=torch.uint8)
            scales = torch.randint(121, 127, (4, n_out, n_in // 32), generator=g, dtype=torch.uint8)
            weights[full + "_blocks"], weights[full + "_scales"] = blocks, scales
            dequantized[full] = dequantize_mxfp4(blocks, scales)
    quant = {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                                  "model.embed_tokens", "lm_head"]}
    folder = os.path.join(work, "gpt-oss-mxfp4")
    write_folder(folder, dict(spec, config=cfg, shards=1), weights, {"quantization_config": quant})
    plan = folder + ".plan"
    subprocess.run([f"{bin_dir}/mtc", folder, "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan],
                   capture_output=True, check=True)
    imported = ref.read_safetensors(folder + ".safetensors")
    for l in range(cfg["num_hidden_layers"]):
        for ours, theirs in (("gate_up", "gate_up_proj"), ("down", "down_proj")):
            got, want = imported[f"layers.{l}.moe.{ours}.weight"], dequantized[f"model.layers.{l}.mlp.experts.{theirs}"]
            if not torch.equal(got, want):
                failures.append(f"mxfp4: layers.{l}.moe.{ours}.weight is not transformers' dequantization bit for bit")
    params = {k: v.float() for k, v in weights.items() if not k.endswith(("_blocks", "_scales"))}
    params.update(dequantized)
    mt_loss, torch_loss = trains_and_exports(bin_dir, folder, params, cfg, data, tokens, "mxfp4", failures)
    print(f"mxfp4: experts dequantized bit for bit; first loss {mt_loss:.6f} vs {torch_loss:.6f}; exported and "
          f"re-imported")
    # Refusals: a scale past f32's range, blocks of the wrong shape, another quantization.
    def past_f32(w):  # scale 2^127 for a block of 6.0s
        w["model.layers.1.mlp.experts.down_proj_scales"].view(-1)[5] = 254
        w["model.layers.1.mlp.experts.down_proj_blocks"].view(-1, 16)[5] = 0x77
    quantized = {"quantization_config": quant}
    cases = [
        ("mxfp4-nan-scale", quantized, lambda w: w["model.layers.1.mlp.experts.down_proj_scales"].view(-1).__setitem__(5, 255),
         "'model.layers.1.mlp.experts.down_proj_blocks': scale 5 is 255, E8M0's NaN"),
        ("mxfp4-inf", quantized, past_f32, "dequantizes to inf: a scale past f32's range"),
        ("mxfp4-no-config", {"quantization_config": None}, None,
         "the weights have no 'model.layers.0.mlp.experts.gate_up_proj'"),
        ("mxfp4-shape", quantized, lambda w: w.update({"model.layers.0.mlp.experts.gate_up_proj_blocks":
                                                       torch.zeros(4, 64, 1, 16, dtype=torch.uint8)}),
         "do not hold a [4,64,64] weight"),
        ("mxfp4-method", {"quantization_config": {"quant_method": "bitsandbytes"}}, None,
         "'quant_method' is \"bitsandbytes\": mtc dequantizes fine-grained FP8 weights"),
    ]
    expect_refusals(bin_dir, work, dict(spec, config=cfg), weights, cases, failures)


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    data = ref.make_corpus(bin_dir, work)
    tokens = ref.read_tokens(data)
    failures = []
    mxfp4_import(bin_dir, work, data, tokens, failures)
    fp8_import(bin_dir, work, data, tokens, failures)
    compressed_import(bin_dir, work, data, tokens, failures)
    ref.finish("hf_quantized", failures)


if __name__ == "__main__":
    main()
