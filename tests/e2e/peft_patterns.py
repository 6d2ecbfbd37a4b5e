"""Per-module ranks and alphas and the choice of layers, PEFT's rank_pattern, alpha_pattern,
layers_to_transform and exclude_modules, on a Hugging Face folder (tests/e2e/hf_folders.py's):
mtc --lora-rank-pattern / --lora-alpha-pattern give weights their own rank and alpha; --export-hf
merges each at its own scale; --export-peft writes r and lora_alpha (what most adapters have) and
the others as patterns, which --lora-from reads back to the bit (and merged bit for bit as
--export-hf merges). PEFT's own forms of the patterns (expressions, the first matching key
counting), its layers_to_transform (with layers_pattern) and exclude_modules (names or an
expression) choose what --lora-from adapts as PEFT would; "all-linear" adapts the same weights as a
flag and as a config; the refusals name what is wrong.

usage: /usr/bin/python3 tests/e2e/peft_patterns.py BIN_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402
from hf_folders import MODELS, hf_name_of, hf_weights, read_hf_safetensors, write_folder  # noqa: E402
from hf_import import SCHEDULE  # noqa: E402
from hf_peft import damaged_adapter, lora_from_refused, same_weights  # noqa: E402

torch.set_num_threads(2)
NAME = "llama-bf16-sharded"
SHAPE = ["--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq)]


def own_rank(stem):
    """--lora-rank-pattern 'mlp\\.=8' 'layers\\.1\\.self_attn\\.q_proj=2' (the second by the folder's name)."""
    return 8 if ".mlp." in stem else 2 if stem == "layers.1.attn.q" else 4


def own_alpha(stem):
    """--lora-alpha-pattern 'o_proj=16' (the folder's name)."""
    return 16.0 if stem.endswith(".attn.o") else 8.0


def adapters_of(weights):
    """The plan names of the adapted weights' stems in `weights`."""
    return sorted(k[:-len(".lora_A.weight")] for k in weights if k.endswith(".lora_A.weight"))


def check_patterns_round_trip(bin_dir, work, data, failures):
    """Every projection adapted, ranks and alphas by pattern: the adapters' shapes, --export-hf's
    merge at each weight's own scale, --export-peft's config, and --lora-from back to the bit."""
    folder = os.path.join(work, NAME)
    plan, trained, merged, peft = (os.path.join(work, s) for s in
                                   ("patterns.plan", "patterns.safetensors", "patterns-hf", "patterns-peft"))
    cmd = [f"{bin_dir}/mtc", folder, *SHAPE, "-o", plan, "--lora", "4", "--lora-alpha", "8", "--lora-targets", "proj",
           "--lora-rank-pattern", r"mlp\.=8", "--lora-rank-pattern", r"layers\.1\.self_attn\.q_proj=2",
           "--lora-alpha-pattern", "o_proj=16"]
    print("+", " ".join(cmd), flush=True)
    summary = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if "on 14 weights; 7 at a rank of their own (2, 8); 2 at an alpha of their own (16)" not in summary:
        failures.append(f"mtc's summary of the patterns: {summary[-400:]}")
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "3", "--lr", "1e-2", "--export", trained,
             "--export-hf", merged, "--export-peft", peft])
    ours = ref.read_safetensors(trained)
    stems = adapters_of(ours)
    wrong = [s for s in stems if ours[s + ".lora_A.weight"].shape[0] != own_rank(s)]
    if len(stems) != 14 or wrong:
        failures.append(f"--lora-rank-pattern: {len(stems)} adapted (want 14), ranks not as the patterns say: {wrong}")
    exported = read_hf_safetensors(os.path.join(merged, "model.safetensors"))
    worst = 0.0
    for s in stems:
        scale = own_alpha(s) / own_rank(s)
        want = ours[s + ".weight"] + scale * (ours[s + ".lora_B.weight"] @ ours[s + ".lora_A.weight"])
        worst = max(worst, ref.rel_err(exported[hf_name_of(s + ".weight")], want))
    if not worst <= 1e-6:
        failures.append(f"--export-hf with patterns: merged {worst:.1e} from W + alpha_m / r_m B A")
    with open(os.path.join(peft, "adapter_config.json")) as f:
        config = json.load(f)
    want = {"r": 4, "lora_alpha": 8.0, "alpha_pattern": {"o_proj": 16.0},
            "rank_pattern": {"gate_proj": 8, "up_proj": 8, "down_proj": 8, r"layers\.1\.self_attn\.q_proj": 2}}
    got = {k: config.get(k) for k in want}
    if got != want:
        failures.append(f"--export-peft with patterns: {got}, want {want}")
    print(f"patterns: 14 adapters at ranks {sorted({own_rank(s) for s in stems})}, --export-hf merged within "
          f"{worst:.1e} of each weight's own scale; --export-peft's rank_pattern {config.get('rank_pattern')}, "
          f"alpha_pattern {config.get('alpha_pattern')}")
    back, gen, merged_gen = (os.path.join(work, s) for s in ("patterns-from.plan", "patterns-gen.plan",
                                                             "patterns-merged-gen.plan"))
    ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", back, "--lora-from", peft])
    start = ref.read_safetensors(back[:-5] + ".safetensors")
    if set(start) != set(ours) or any(not torch.equal(start[k], ours[k]) for k in ours):
        failures.append("--lora-from a folder with patterns: not the trained weights to the bit")
    ref.run([f"{bin_dir}/mtc", folder, "--forward-only", "--batch", "1", "--seq", "64", "-o", gen, "--lora-from", peft])
    ref.run([f"{bin_dir}/mtc", merged, "--forward-only", "--batch", "1", "--seq", "64", "-o", merged_gen])
    if not same_weights(gen, merged_gen):
        failures.append("--forward-only --lora-from with patterns: not --export-hf's merged weights bit for bit")
    # PEFT's other forms of the same patterns: expressions matched at a name's end, the first
    # matching key in the file's order counting; in the other order, layer 1's q_proj takes rank 4.
    forms = {"^model.layers.1.self_attn.q_proj": 2, r"layers\.\d\.mlp\..*": 8, r"self_attn\.._proj": 4}
    forms_plan = os.path.join(work, "forms.plan")
    ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", forms_plan, "--lora-from",
             damaged_adapter(work, peft, "forms", {"rank_pattern": forms, "r": 6, "alpha_pattern": {"o_.*": 16}})])
    if not same_weights(forms_plan, back):
        failures.append(f"--lora-from with rank_pattern {forms}: not the weights of --export-peft's form")
    # The alphas (which the starting weights do not show): the two o_proj As carry 16, no other one.
    for p in (back, forms_plan):
        tensors = subprocess.run([f"{bin_dir}/mtdump", p, "--tensors"], check=True, capture_output=True,
                                 text=True).stdout
        own = sorted(line.split()[4] for line in tensors.splitlines() if "(alpha " in line)
        if own != ["layers.0.attn.o.lora_A.weight", "layers.1.attn.o.lora_A.weight"] or \
                tensors.count("(alpha 16)") != 2:
            failures.append(f"--lora-from {os.path.basename(p)}: own alphas on {own}, want the o_proj As at 16")
    reordered = dict(reversed(list(forms.items())))
    lora_from_refused(bin_dir, work, damaged_adapter(work, peft, "reordered", {"rank_pattern": reordered}),
                      "needs [4, 64]", failures, model=folder)
    print("patterns: --lora-from reads them back to the bit and merged bit for bit as --export-hf; PEFT's forms of "
          "them alike, the first matching key counting")


def check_layers_and_exclusions(bin_dir, work, failures):
    """layers_to_transform (with and without layers_pattern) and exclude_modules (names, an
    expression) on q_proj and v_proj's adapters of both layers: --lora-from adapts what PEFT would,
    the file's other tensors refused as having no place; forms PEFT refuses, refused."""
    folder = os.path.join(work, NAME)
    plan, peft = os.path.join(work, "qv.plan"), os.path.join(work, "qv-peft")
    ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", plan, "--lora", "4", "--lora-targets", "(q|v)_proj",
             "--lora-alpha-pattern", "v_proj=0.1"])
    ref.run([f"{bin_dir}/mtrun", plan, "--steps", "1", "--export-peft", peft, "--data",
             ref.make_corpus(bin_dir, work)])
    keys = read_hf_safetensors(os.path.join(peft, "adapter_model.safetensors"))
    with open(os.path.join(peft, "adapter_config.json")) as f:
        alphas = json.load(f)["alpha_pattern"]
    if alphas != {"v_proj": 0.1}:  # the shortest decimal of the float, not 0.10000000149011612
        failures.append(f"--export-peft of an alpha of 0.1: alpha_pattern {alphas}")

    def without(*parts):  # the file's adapters but those of modules naming every part
        return [k for k in keys if all(p in k for p in parts)]
    cases = (  # (tag, config changes, tensors dropped, the adapted weights)
        ("layer1", {"layers_to_transform": [1], "layers_pattern": "layers"}, without("layers.0."),
         ["layers.1.attn.q", "layers.1.attn.v"]),
        ("layer0", {"layers_to_transform": 0}, without("layers.1."), ["layers.0.attn.q", "layers.0.attn.v"]),
        ("no-v", {"exclude_modules": ["v_proj"]}, without("v_proj"), ["layers.0.attn.q", "layers.1.attn.q"]),
        ("no-v0", {"exclude_modules": r".*\.0\.self_attn\.v_proj"}, without("layers.0.", "v_proj"),
         ["layers.0.attn.q", "layers.1.attn.q", "layers.1.attn.v"]),
        ("all-layers", {"layers_to_transform": [], "layers_pattern": "layers"}, [],  # PEFT: [] is every layer
         ["layers.0.attn.q", "layers.0.attn.v", "layers.1.attn.q", "layers.1.attn.v"]))
    for tag, change, dropped, want in cases:
        adapter = damaged_adapter(work, peft, tag, change)
        tensors = {k: v for k, v in keys.items() if k not in dropped}
        ref.write_safetensors(os.path.join(adapter, "adapter_model.safetensors"), tensors)
        ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", os.path.join(work, tag + ".plan"), "--lora-from", adapter])
        got = adapters_of(ref.read_safetensors(os.path.join(work, tag + ".safetensors")))
        if got != want:
            failures.append(f"--lora-from with {change}: adapts {got}, want {want}")
        if dropped:  # the whole file: the tensors of the modules left out have no place
            lora_from_refused(bin_dir, work, damaged_adapter(work, peft, tag + "-all", change), "which has no place",
                              failures, model=folder)
    print(f"layers_to_transform and exclude_modules: {len(cases)} configs adapt what PEFT would, the rest refused")
    for change, want in (({"layers_to_transform": [1], "target_modules": "all-linear"}, "PEFT takes layers only"),
                         ({"layers_to_transform": [1], "layers_pattern": "lay.rs"}, "not an expression"),
                         ({"layers_pattern": "layers"}, "without layers_to_transform"),
                         ({"layers_to_transform": [-1]}, "each must be a layer index"),
                         ({"layers_to_transform": False}, "give a layer index or a list of them"),
                         ({"rank_pattern": {"self_attn)|(x": 8}}, "rank_pattern['self_attn)|(x']"),
                         ({"rank_pattern": {"q_proj": 0}}, "rank_pattern['q_proj'] must be an integer"),
                         ({"alpha_pattern": {"q_proj": "8"}}, "alpha_pattern['q_proj'] must be a number"),
                         ({"rank_pattern": {"(q_proj": 8}}, "rank_pattern['(q_proj']"),
                         ({"rank_pattern": ["q_proj"]}, "rank_pattern must be an object")):
        lora_from_refused(bin_dir, work, damaged_adapter(work, peft, "refused", change), want, failures, model=folder)


def check_all_linear(bin_dir, work, data, failures):
    """PEFT's target_modules "all-linear", both ways: mtc --lora-targets all-linear (in any case, as
    PEFT reads it) adapts the layers' 14 projections of the Llama folder, and --lora-from reads a
    config saying "all-linear" onto the same 14; on a mixture (built-in qwen3-moe-tiny, a Qwen3-MoE
    folder with a dense layer, a gpt-oss folder) the attention's and the dense MLPs' alone: routers
    and experts are bare parameters in transformers 5, no nn.Linear."""
    folder = os.path.join(work, NAME)
    plan, trained, peft = (os.path.join(work, s) for s in ("linear.plan", "linear.safetensors", "linear-peft"))
    ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", plan, "--lora", "4", "--lora-targets", "All-Linear"])
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--steps", "1", "--export", trained, "--export-peft", peft])
    want = [f"layers.{layer}.{m}" for layer in (0, 1)
            for m in ("attn.k", "attn.o", "attn.q", "attn.v", "mlp.down", "mlp.gate", "mlp.up")]
    got = adapters_of(ref.read_safetensors(trained))
    if got != want:
        failures.append(f"--lora-targets all-linear on a Llama folder adapts {got}, want {want}")
    adapter = damaged_adapter(work, peft, "linear-all", {"target_modules": "all-linear"})
    ref.run([f"{bin_dir}/mtc", folder, *SHAPE, "-o", os.path.join(work, "linear-all.plan"), "--lora-from", adapter])
    from_config = adapters_of(ref.read_safetensors(os.path.join(work, "linear-all.safetensors")))
    if from_config != want:
        failures.append(f"--lora-from a config of target_modules 'all-linear' adapts {from_config}, want {want}")
    attention = [f"layers.{layer}.attn.{m}" for layer in (0, 1, 2) for m in "koqv"]
    mixtures = (  # (model, the adapted weights): no router, whose folder name holds "mlp." too
        ("qwen3-moe-tiny", attention[:8]),
        # its layer 1's MLP dense (mlp_only_layers): adapted
        ("qwen3-moe-bf16-sharded", sorted(attention + [f"layers.1.mlp.{m}" for m in ("down", "gate", "up")])),
        ("gpt-oss-bf16", attention[:8]))
    for model, moe_want in mixtures:
        source = model
        if model in MODELS:
            source = os.path.join(work, model)
            write_folder(source, MODELS[model], hf_weights(MODELS[model]["config"], False, MODELS[model]["dtype"], seed=3))
        ref.run([f"{bin_dir}/mtc", source, *SHAPE, "-o", os.path.join(work, f"linear-{model}.plan"), "--lora", "4",
                 "--lora-targets", "all-linear"])
        moe_got = adapters_of(ref.read_safetensors(os.path.join(work, f"linear-{model}.safetensors")))
        if moe_got != moe_want:
            failures.append(f"--lora-targets all-linear on {model} adapts {moe_got}, want {moe_want}")
    # --export-peft --peft-experts fused refuses the dense MLP layer's adapters, before the run: PEFT
    # 0.19 and later on transformers 5 take their names for the experts' fused parameters.
    fused_dir = os.path.join(work, "linear-fused-peft")
    r = subprocess.run([f"{bin_dir}/mtrun", os.path.join(work, "linear-qwen3-moe-bf16-sharded.plan"), "--data", data,
                        "--steps", "1", "--export-peft", fused_dir, "--peft-experts", "fused"],
                       capture_output=True, text=True)
    refusal = "the dense MLP layer model.layers.1.mlp.down_proj is adapted"
    if r.returncode == 0 or refusal not in r.stderr or os.path.exists(fused_dir):
        failures.append(f"--peft-experts fused with a dense MLP layer adapted: exit {r.returncode}, want an error "
                        f"naming {refusal!r}: {r.stderr.strip()[:300]}")
    print(f"all-linear: {len(got)} projections of the Llama folder by the flag and by a config alike; the "
          f"mixtures' attention and dense MLPs, no router ({', '.join(m for m, _ in mixtures)})")


def check_flag_refusals(bin_dir, work, failures):
    """mtc's pattern flags: malformed ones, one that finds no adapted weight and one hidden behind an
    earlier one, each named."""
    for flags, want in ((["--lora-rank-pattern", "mlp=2.5"], "R an integer in [1, 65536]"),
                        (["--lora-alpha-pattern", "mlp"], "give REGEX=ALPHA"),
                        (["--lora-rank-pattern", "(mlp=8"], "is not a regular expression"),
                        (["--lora-rank-pattern", "mlp=0x10"], "R an integer in [1, 65536]"),
                        (["--lora-alpha-pattern", "norm=4"], "--lora-alpha-pattern 'norm' decides no adapted weight's"),
                        (["--lora-rank-pattern", "attn=8", "--lora-rank-pattern", r"attn\.q=2"],
                         r"--lora-rank-pattern 'attn\.q' decides no adapted weight's rank")):
        r = subprocess.run([f"{bin_dir}/mtc", "llama-tiny", "--lora", "4", "-o", os.path.join(work, "flag.plan"),
                            *flags], capture_output=True, text=True)
        if r.returncode == 0 or want not in r.stderr or os.path.exists(os.path.join(work, "flag.plan")):
            failures.append(f"mtc {' '.join(flags)}: exit {r.returncode}, want an error naming {want!r}: "
                            f"{r.stderr.strip()[:300]}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    data = ref.make_corpus(bin_dir, work)
    failures = []
    spec = MODELS[NAME]
    write_folder(os.path.join(work, NAME), spec, hf_weights(spec["config"], False, spec["dtype"], seed=3))
    check_patterns_round_trip(bin_dir, work, data, failures)
    check_layers_and_exclusions(bin_dir, work, failures)
    check_all_linear(bin_dir, work, data, failures)
    check_flag_refusals(bin_dir, work, failures)
    ref.finish("peft_patterns", failures)


if __name__ == "__main__":
    main()
