"""End to end against PyTorch: a built-in model compiled by mtc and trained by mtrun must give
PyTorch's gradients (first step, every parameter, relative error <= 1e-5) and PyTorch's loss
curve (20 steps, each loss within 1e-4 relative) from the same initial weights and batches, and
its final weights within 1e-5 relative. A preset may name tensors whose final weights get 1e-3
instead, with the reason: AdamW normalises each element's gradient, so a gradient that nearly
cancels (Qwen's key bias under RoPE: 6e-5 of the global norm) turns fp32 summation-order noise
into lr-sized steps; their step-1 gradients are still held to 1e-5. A preset with `trainable`
or `frozen` (mtc's flags of those names) trains the rest alone on both sides: PyTorch with those
parameters' requires_grad off; mtrun must dump no gradient for them and leave them unchanged to
the bit.

usage: /usr/bin/python3 tests/e2e/torch_parity.py BIN_DIR WORK_DIR MODEL [mtc flags...]
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)

GRAD_TOL = 1e-5
ZERO_GRAD = 1e-7  # relative to the global gradient norm
LOSS_TOL = 1e-4
BATCH, SEQ = 4, 32
SCHEDULE = ref.Schedule(steps=20, lr=3e-3, warmup=5, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=7,
                        batch=BATCH, seq=SEQ)

PRESETS = {  # must match models/BuiltinModels.cpp
    "gpt2-tiny": dict(family="gpt2", layers=2, width=64, heads=4, kv_heads=4, tied=True),
    "llama-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False),
    "qwen-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, eps=1e-6,
                      rope_theta=1e6, ill_conditioned=("attn.k.bias",)),
    # Qwen3: heads of 32 in width 64 (not 64 / 4), each head of q and k RMS-normalized before RoPE.
    "qwen3-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, eps=1e-6,
                       rope_theta=1e6, head_dim=32),
    # Mixtures of experts: 4 SwiGLU experts, the top 2 of the router's softmax renormalised; Qwen3's
    # trained with the router's load-balancing loss (times aux_coef, mtc --router-aux-loss) too.
    "qwen3-moe-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, eps=1e-6,
                           rope_theta=1e6, head_dim=32, experts_per_token=2, experts=4, aux_coef=0.05),
    # Qwen2-MoE: Qwen2's q/k/v biases, the top 2 of the softmax as they are (norm_topk_prob false),
    # a shared expert of width 48 beside the routed ones, gated by sigmoid(h . shared_gate).
    "qwen2-moe-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, eps=1e-6,
                           rope_theta=1e6, experts_per_token=2, experts=4, normalize_topk=False,
                           ill_conditioned=("attn.k.bias",), expected=("moe.shared.gate", "moe.shared.up",
                                                                       "moe.shared.down", "moe.shared_gate")),
    # OLMoE: q and k normed over their whole projections (not per head), experts as wide as the MLP
    # in every layer, the top 2 of the softmax as they are.
    "olmoe-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, eps=1e-5,
                       rope_theta=1e4, experts_per_token=2, experts=4, normalize_topk=False),
    "mixtral-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, rope_theta=1e6,
                         experts_per_token=2),
    # gpt-oss: q/k/v/o biases, a sink per head, an 8-token window on layer 0 (of 32 tokens), the
    # biased router's top 2 logits softmaxed, interleaved gate_up and the SwiGLU clamped at 0.1.
    "gpt-oss-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False, window=8,
                         sliding_layers=(0,), experts_per_token=2, swiglu_limit=0.1),
}
# Routing's edge cases (issue 33), as a preset with mtc flags (`preset`, `flags`) and, where given,
# a bias added to every layer's router (`router_bias`, one value per expert):
# - k = the number of experts: every expert gets every token;
# - every token to one expert (top 1; expert 0's bias far above the others): the other experts get
#   no token, so their gradients are exactly zero and AdamW only decays them (their final weights
#   are compared too), and a softmax over one logit gives the router no gradient at all. All rows
#   through one expert crowd its up values at the clamp (swiglu_limit 0.1): a value within rounding
#   of the edge has a gradient on one side and none on the other, so gate_up (its bias and the
#   weights feeding that entry) is ill-conditioned under AdamW: on an AMD EPYC, OpenBLAS's Haswell
#   kernels rounding otherwise than the machines before, one of the bias's 64 trained entries ended
#   9.3e-6 apart (9.0e-5 relative), the weight 4.2e-5 relative; losses and step-1 gradients as tight.
PRESETS["mixtral-tiny-k4"] = dict(PRESETS["mixtral-tiny"], experts_per_token=4, preset="mixtral-tiny",
                                  flags=["--experts-per-token", "4"])
PRESETS["gpt-oss-tiny-one-expert"] = dict(PRESETS["gpt-oss-tiny"], experts_per_token=1, preset="gpt-oss-tiny",
                                          flags=["--experts-per-token", "1"], router_bias=[30.0, 0.0, 0.0, 0.0],
                                          ill_conditioned=("moe.gate_up.bias", "moe.gate_up.weight"))
# Parameters kept out of training (mtc --trainable / --frozen, a regular expression searched in
# each name, which Python's re reads alike for these):
# - the top layer, the final norm and the head alone: the backward stops at layer 1;
# - Qwen3-MoE's experts frozen between trained routers and attention: gradients pass through
#   frozen grouped products;
# - GPT-2's tied table frozen with layer 0: the head is frozen too, the backward stops at layer 1.
PRESETS["llama-tiny-top"] = dict(PRESETS["llama-tiny"], preset="llama-tiny", trainable=r"layers\.1\.|^norm|lm_head")
PRESETS["qwen3-moe-tiny-frozen-experts"] = dict(PRESETS["qwen3-moe-tiny"], preset="qwen3-moe-tiny",
                                                frozen=r"moe\.(gate|up|down)\.")
PRESETS["gpt2-tiny-frozen-table"] = dict(PRESETS["gpt2-tiny"], preset="gpt2-tiny", frozen=r"^wte|^wpe|blocks\.0\.")
# LoRA (mtc --lora): rank-4 adapters at alpha 8 (scale 2) on every projection of Llama's layers,
# the base frozen but the final norm (--trainable, PEFT's modules_to_save): A's step-1 gradient is
# exactly zero (B starts at zero) on both sides.
PRESETS["llama-tiny-lora"] = dict(PRESETS["llama-tiny"], preset="llama-tiny", lora_scale=2.0,
                                  flags=["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.|mlp\.",
                                         "--trainable", r"^norm\."],
                                  trainable=r"lora_|^norm\.")
# LoRA+ (mtrun --lora-plus-ratio 4): the adapters' B and the trained 1-D final norm at 4 x the
# rate, A at the rate, as PEFT's create_loraplus_optimizer groups them. (At 16, B's rate is 4.8e-2
# at this schedule's peak: the losses agree within 1e-7 for 16 steps, then rounding grows to 3e-6.)
PRESETS["llama-tiny-lora-plus"] = dict(PRESETS["llama-tiny-lora"], run_flags=["--lora-plus-ratio", "4"],
                                       lr_scale=lambda name: 4.0 if "lora_B" in name or name == "norm.weight" else 1.0)
# PEFT's use_rslora and lora_dropout: the scale alpha / sqrt(r) = 4, and each adapted product's
# input through its own mt.dropout mask, which the twin draws (mt_reference.Dropout) in the order
# mt-lora numbers the sites: the products' order in the forward.
PRESETS["llama-tiny-lora-dropout"] = dict(PRESETS["llama-tiny"], preset="llama-tiny", lora_scale=4.0,
                                          lora_dropout=0.1, trainable=r"lora_",
                                          flags=["--lora", "4", "--lora-alpha", "8", "--lora-rslora",
                                                 "--lora-dropout", "0.1", "--lora-targets", r"attn\.|mlp\."])
# PEFT's use_dora (mtc --lora-dora): each adapted weight's magnitude m starts at its row norms and
# trains with A and B; the norm ||W + s B A|| is a constant to the backward on both sides. Without
# dropout DoRA's base term is the product itself; with it, a second product from the dropped input.
# The scale 12 / 4 = 3 is no power of two: mt-lora's order of operations (the scale on x A^T, g
# times y plus the update) rounds otherwise than the twin's (PEFT's), within the tolerances.
PRESETS["llama-tiny-dora"] = dict(PRESETS["llama-tiny"], preset="llama-tiny", lora_scale=3.0, trainable=r"lora_",
                                  flags=["--lora", "4", "--lora-alpha", "12", "--lora-dora", "--lora-targets",
                                         r"attn\.|mlp\."])
PRESETS["llama-tiny-dora-dropout"] = dict(PRESETS["llama-tiny-dora"], lora_dropout=0.1,
                                          flags=PRESETS["llama-tiny-dora"]["flags"] + ["--lora-dropout", "0.1"])
# With DoRA: the magnitudes are 1-D, so at the raised rate too.
PRESETS["llama-tiny-dora-plus"] = dict(PRESETS["llama-tiny-dora"], run_flags=["--lora-plus-ratio", "4"],
                                       lr_scale=lambda name: 4.0 if "lora_B" in name or "magnitude" in name else 1.0)
# PEFT's rank_pattern and alpha_pattern (mtc --lora-rank-pattern, --lora-alpha-pattern; the first
# pattern that finds a weight counts): rank 8 on the MLP's projections, 4 elsewhere; alpha 24 on
# attention's output, 6 on the MLP's down projection (before 'mlp\.=64', which gives gate and up
# theirs), 8 elsewhere. Each weight's scale is its own (6 and 0.75 no powers of two).
PRESETS["llama-tiny-lora-patterns"] = dict(
    PRESETS["llama-tiny"], preset="llama-tiny", trainable=r"lora_",
    lora_rank=lambda name: 8 if ".mlp." in name else 4,
    lora_scale=lambda name: ((24 if ".attn.o." in name else 6 if ".mlp.down." in name else 64 if ".mlp." in name
                             else 8) / (8 if ".mlp." in name else 4)),
    flags=["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.|mlp\.", "--lora-rank-pattern", r"mlp\.=8",
           "--lora-alpha-pattern", r"attn\.o=24", "--lora-alpha-pattern", r"mlp\.down=6", "--lora-alpha-pattern",
           r"mlp\.=64"])
# PEFT's target_parameters (mtc --lora-experts): rank-4 adapters on each expert of every stack,
# beside attention's projections; the twin merges each expert's B_e A_e into its weight as PEFT's
# ParamWrapper does, mtc runs them as two grouped products. Qwen3-MoE's stacks are (E, out, in),
# gpt-oss's (E, in, out).
PRESETS["qwen3-moe-tiny-lora-experts"] = dict(PRESETS["qwen3-moe-tiny"], preset="qwen3-moe-tiny", lora_scale=2.0,
                                              trainable=r"lora_",
                                              flags=["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.",
                                                     "--lora-experts", r"moe\."])
# With --lora-dropout (PEFT's per-expert layers' lora_dropout): each adapted product's routed rows
# through their own mask, which the twin draws over the rows in mt.moe_dispatch's order
# (mt_reference.experts_dropped), the experts' adapters run apart from their weights.
PRESETS["qwen3-moe-tiny-lora-experts-dropout"] = dict(PRESETS["qwen3-moe-tiny-lora-experts"], lora_dropout=0.1,
                                                      flags=PRESETS["qwen3-moe-tiny-lora-experts"]["flags"] +
                                                      ["--lora-dropout", "0.1"])
PRESETS["gpt-oss-tiny-lora-experts"] = dict(PRESETS["gpt-oss-tiny"], preset="gpt-oss-tiny", lora_scale=2.0,
                                            trainable=r"lora_",
                                            flags=["--lora", "4", "--lora-alpha", "8", "--lora-targets", r"attn\.",
                                                   "--lora-experts", r"moe\."])
ILL_CONDITIONED_WEIGHT_TOL = 1e-3


def frozen_names(cfg, names):
    """The parameters mtc keeps out of training for the preset's --trainable / --frozen."""
    return {n for n in names if ("frozen" in cfg and re.search(cfg["frozen"], n)) or
            ("trainable" in cfg and not re.search(cfg["trainable"], n))}


def main():
    bin_dir, work, model = sys.argv[1], sys.argv[2], sys.argv[3]
    cfg = dict(PRESETS[model])
    extra = cfg.get("flags", []) + sys.argv[4:]
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, model + ".plan")
    weights = os.path.join(work, model + ".safetensors")
    data = ref.make_corpus(bin_dir, work)
    if "aux_coef" in cfg:
        extra += ["--router-aux-loss", str(cfg["aux_coef"])]
    for flag in ("trainable", "frozen"):
        if flag in cfg and "lora_scale" not in cfg:  # a LoRA preset's flags say what trains
            extra += ["--" + flag, cfg[flag]]
    ref.run([f"{bin_dir}/mtc", cfg.get("preset", model), "--batch", str(BATCH), "--seq", str(SEQ), "-o", plan, "--seed",
             "3"] + extra)
    if "router_bias" in cfg:  # the routers biased as the variant says, in the weights both sides start from
        start = ref.read_safetensors(weights)
        for name in start:
            if name.endswith("moe.router.bias"):
                start[name] = start[name] + torch.tensor(cfg["router_bias"])
        ref.write_safetensors(weights, start)
    log, grads_path, final = (os.path.join(work, n) for n in ("log.jsonl", "grads.safetensors", "final.safetensors"))
    ref.run([f"{bin_dir}/mtrun", plan, "--data", data, "--weights", weights, "--log", log, "--dump-grads", grads_path,
         "--export", final, "--print-every", "5"] + SCHEDULE.mtrun_flags() + cfg.get("run_flags", []))
    mt_losses = [json.loads(line)["loss"] for line in open(log)]
    mt_grads = ref.read_safetensors(grads_path)
    mt_final = ref.read_safetensors(final)

    start = ref.read_safetensors(weights)
    frozen = frozen_names(cfg, start)
    params = {k: v.clone().requires_grad_(k not in frozen) for k, v in start.items()}
    trained = {k: v for k, v in params.items() if k not in frozen}  # what the optimizer sees
    tokens = ref.read_tokens(data)
    failures = []
    # Parameters the preset must have in every MoE layer (the reference computes what it is given:
    # a builder that dropped them would otherwise pass unseen).
    missing = [f"layers.{l}.{n}.weight" for l in range(cfg["layers"]) for n in cfg.get("expected", ())
               if f"layers.{l}.{n}.weight" not in start]
    if missing:
        failures.append(f"the plan's weights lack {missing}")
    if frozen:
        dumped = sorted(frozen & set(mt_grads))
        changed = sorted(n for n in frozen if not torch.equal(mt_final[n], start[n]))
        if dumped or changed or not trained:
            failures.append(f"frozen parameters: gradients dumped {dumped}, weights changed {changed}, "
                            f"{len(trained)} trained")
        print(f"frozen: {len(frozen)} of {len(params)} tensors, no gradient dumped, weights unchanged to the bit")
    if "lora_rank" in cfg:  # each adapter's rank its own
        ranks = {n: start[n].shape[0] for n in start if n.endswith(".lora_A.weight")}
        wrong = {n: r for n, r in ranks.items() if r != cfg["lora_rank"](n)}
        if wrong or not ranks:
            failures.append(f"LoRA ranks: {wrong or 'no adapters'}")
        print(f"LoRA ranks: {sorted(set(ranks.values()))} over {len(ranks)} adapters, each as its pattern says")
    magnitudes = sorted(n for n in start if n.endswith(".lora_magnitude_vector"))
    if magnitudes:  # DoRA's m starts at its weight's row norms (PEFT's DoraLinearLayer.update_layer)
        worst_m = max(ref.rel_err(start[n], torch.linalg.norm(start[n[:-len("lora_magnitude_vector")] + "weight"], dim=1))
                      for n in magnitudes)
        if not worst_m <= 1e-6:
            failures.append(f"DoRA magnitudes: not their weights' row norms (relative error {worst_m:.3e})")
        print(f"DoRA: {len(magnitudes)} magnitudes start at their weights' row norms (worst relative error {worst_m:.3e})")
    zero_grad = set()
    exact_zero = set()  # zero on both sides to the bit: no noise for AdamW to amplify, so compared

    def check_step1_gradients(step):
        if step != 1:
            return
        # A gradient that is zero in exact arithmetic (the key bias: softmax ignores a
        # constant added to a row of scores) is float noise on both sides; it is checked
        # to be noise-sized instead of relatively equal, and its weights are left out of
        # the final comparison, since AdamW turns noise into lr-sized steps.
        global_norm = sum(float(p.grad.norm()) ** 2 for p in trained.values()) ** 0.5
        worst = 0.0
        for name, p in trained.items():
            if float(p.grad.norm()) <= ZERO_GRAD * global_norm:
                zero_grad.add(name)
                if not float(mt_grads[name].norm()) <= ZERO_GRAD * global_norm:
                    failures.append(f"gradient of {name}: should be zero, norm {float(mt_grads[name].norm()):.3e}")
                if not p.grad.any() and not mt_grads[name].any():
                    exact_zero.add(name)
                continue
            # An expert no token chose: its slices of the stacked weights' gradients exactly zero.
            if "router_bias" in cfg and ".moe." in name and not name.endswith(("router.weight", "router.bias")):
                unused = [e for e in range(p.grad.shape[0]) if not p.grad[e].any()]
                if unused != [1, 2, 3] or any(mt_grads[name][e].any() for e in unused):
                    failures.append(f"gradient of {name}: experts {unused} got no token on torch's side; ours "
                                    f"{[e for e in range(p.grad.shape[0]) if not mt_grads[name][e].any()]}")
            err = ref.rel_err(mt_grads[name], p.grad)
            worst = max(worst, err)
            if not err <= GRAD_TOL:
                failures.append(f"gradient of {name}: relative error {err:.3e} > {GRAD_TOL}")
        print(f"step-1 gradients: {len(trained) - len(zero_grad)} tensors, worst relative error "
              f"{worst:.3e}; {len(zero_grad)} analytically zero: {sorted(zero_grad)}")

    if "lora_dropout" in cfg:  # mt.dropout's masks, one plan run per step
        drops, runs = ref.Dropout(SCHEDULE.seed), iter(range(SCHEDULE.steps))
        cfg["lora_drop"] = lambda h: drops.apply(h, cfg["lora_dropout"])

    def logits_of(x):
        if "lora_dropout" in cfg:
            drops.begin_run(next(runs))
        if "aux_coef" not in cfg:
            return ref.forward(params, cfg, x)
        router_logits = []
        logits = ref.forward(params, cfg, x, router_logits)
        return logits, ref.load_balancing_loss(router_logits, cfg["experts"], cfg["experts_per_token"])

    torch_aux = []
    torch_losses = ref.torch_train(trained, logits_of, tokens, SCHEDULE, after_backward=check_step1_gradients,
                                   aux_coef=cfg.get("aux_coef", 0.0), aux_log=torch_aux, lr_scale=cfg.get("lr_scale"))
    worst_loss = ref.compare_losses(mt_losses, torch_losses, LOSS_TOL, failures)
    print(f"losses: {SCHEDULE.steps} steps, first {torch_losses[0]:.4f} last {torch_losses[-1]:.4f}, "
          f"worst relative difference {worst_loss:.3e}")
    if torch_aux:
        mt_aux = [json.loads(line)["aux_loss"] for line in open(log)]
        worst_aux = ref.compare_losses(mt_aux, torch_aux, LOSS_TOL, failures)
        print(f"load-balancing losses (x {cfg['aux_coef']} in the loss): first {torch_aux[0]:.4f} last "
              f"{torch_aux[-1]:.4f}, worst relative difference {worst_aux:.3e}")
    loose = {n for n in trained if n.endswith(cfg.get("ill_conditioned", ())) and n not in zero_grad}
    compared = set(trained) - (zero_grad - exact_zero) - loose
    if exact_zero:
        print(f"gradients exactly zero on both sides (AdamW only decays them; weights compared): {sorted(exact_zero)}")
    for names, tol in ((compared, 1e-5), (loose, ILL_CONDITIONED_WEIGHT_TOL)):
        if not names:
            continue
        worst_w, worst_name = max((ref.rel_err(mt_final[n], params[n].detach()), n) for n in names)
        print(f"final weights ({len(names)} tensors{', ill-conditioned under AdamW' if names is loose else ''}): "
              f"worst relative error {worst_w:.3e} ({worst_name})")
        if not worst_w <= tol:
            failures.append(f"final weights differ: worst relative error {worst_w:.3e} > {tol} ({worst_name})")
    ref.finish(model, failures)


if __name__ == "__main__":
    main()
