"""Compares two runs of a model, by default one plan on the cpu and the cuda backend:
PREFIX.{A,B}.jsonl (mtrun --log), PREFIX.{A,B}.safetensors (mtrun --export) and
PREFIX.A.grads.safetensors (mtrun --dump-grads: the first step's gradients). Losses must agree to LOSS_TOL relative at every step and every weight
tensor to WEIGHT_TOL relative, and where PREFIX.B.grads.safetensors is there too, every first-step
gradient to WEIGHT_TOL (a kernel's error shows there before AdamW's steps blur it: a tensor that
starts at zero, a bias or a LoRA B, moves by lr-sized steps whose signs follow its noise), except
tensors whose gradient is analytically zero (attention's key
bias: softmax ignores a per-row shift), where AdamW turns each backend's rounding noise into
lr-sized steps of its own. With --bf16 (a bf16 plan: each backend rounds its own f32 sums to
bf16, so a rounding here and there differs and AdamW carries it on) losses within 1e-2 and
weights within 5e-2; --tol LOSS,WEIGHT sets both. --spread C[,C2...]: PREFIX.C.* are more runs,
A's backend from slightly perturbed starting weights (each its own perturbation); each tensor's
bound becomes twice A's largest distance to them where that passes the fixed bound, at most 10
times the fixed bound (a mixture's routing or AdamW's near-zero steps can carry A's own spread past
the fixed bounds; such events are discrete, so one perturbation can miss what another shows).
Prints one line; exits 1 on a mismatch.
usage: backend_parity.py PREFIX STEPS [A B] [--bf16 | --tol LOSS,WEIGHT] [--spread C[,C2...]]   (A B: cpu cuda; used by
tests/e2e/cuda_parity.sh, bench/gpu/run.sh, tests/e2e/vocab_split.sh and token_tiles.sh)"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

LOSS_TOL, WEIGHT_TOL = 1e-4, 1e-3


def measure(prefix, first, second, zero_grad):
    """The losses' worst relative difference, each weight's and (where both runs dumped them) each
    first-step gradient's relative error of run `second` against run `first`."""
    losses = [[json.loads(line)["loss"] for line in open(f"{prefix}.{b}.jsonl")] for b in (first, second)]
    weights = [ref.read_safetensors(f"{prefix}.{b}.safetensors") for b in (first, second)]
    loss_err = max((abs(a - b) / abs(a) for a, b in zip(*losses)), default=float("inf"))
    errs = {n: ref.rel_err(weights[1][n], w) for n, w in weights[0].items() if n not in zero_grad}
    grad_errs = None
    if os.path.exists(f"{prefix}.{second}.grads.safetensors"):
        grads = ref.read_safetensors(f"{prefix}.{first}.grads.safetensors")
        other = ref.read_safetensors(f"{prefix}.{second}.grads.safetensors")
        grad_errs = {n: ref.rel_err(other[n], g) for n, g in grads.items() if n not in zero_grad}
    return [len(run) for run in losses], loss_err, errs, grad_errs


def main():
    bf16 = "--bf16" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--bf16"]
    loss_tol, weight_tol = (1e-2, 5e-2) if bf16 else (LOSS_TOL, WEIGHT_TOL)
    if "--tol" in args:
        at = args.index("--tol")
        loss_tol, weight_tol = (float(x) for x in args[at + 1].split(","))
        del args[at:at + 2]
    spread_runs = []
    if "--spread" in args:
        at = args.index("--spread")
        spread_runs = args[at + 1].split(",")
        del args[at:at + 2]
    prefix, steps = args[0], int(args[1])
    runs = tuple(args[2:4]) if len(args) >= 4 else ("cpu", "cuda")
    name = os.path.basename(prefix)
    try:
        grads = ref.read_safetensors(f"{prefix}.{runs[0]}.grads.safetensors")
        total = sum(float(g.norm()) ** 2 for g in grads.values()) ** 0.5
        # Analytically zero: fp32 sums leave ~1e-8 of the total norm in such a gradient, bf16's
        # roundings ~2e-7 (gpt2-tiny-mixed's key biases; its smallest real gradient, the query bias,
        # is 2e-4 of the total).
        # A LoRA A's first-step gradient is zero too (B starts at zero), but it trains from the second
        # step: it is compared.
        zero_grad = sorted(n for n, g in grads.items()
                           if float(g.norm()) <= (1e-5 if bf16 else 1e-7) * total and ".lora_A." not in n)
        lengths, loss_err, errs, grad_errs = measure(prefix, runs[0], runs[1], zero_grad)
        # The first run's own spread: the same backend from starting weights perturbed a little
        # (bench/gpu/run.sh: by 1e-3 relative, a quarter of a bf16 ulp). Where rounding decides
        # discrete choices (a mixture's top-k experts) or AdamW turns near-zero gradients into
        # lr-sized steps, a tensor's spread can pass the fixed bound; its bound is then twice it.
        weight_bound = {n: weight_tol for n in errs}
        grad_bound = {n: weight_tol for n in grad_errs or {}}
        spread_words = ""
        if spread_runs:
            spread_loss, spread_errs, spread_grads = 0.0, {n: 0.0 for n in errs}, None
            for spread_run in spread_runs:  # each tensor's largest distance over the perturbations
                spread_lengths, loss, run_errs, run_grads = measure(prefix, runs[0], spread_run, zero_grad)
                if any(n != steps for n in spread_lengths) or not math.isfinite(loss):
                    print(f"{name}: FAIL (the spread run {spread_run} has {spread_lengths[1]} of {steps} steps, "
                          f"its losses' distance {loss})")
                    return 1
                spread_loss = max(spread_loss, loss)
                spread_errs = {n: max(spread_errs[n], run_errs[n]) for n in errs}
                if run_grads is not None:
                    spread_grads = {n: max((spread_grads or {}).get(n, 0.0), e) for n, e in run_grads.items()}
            # Raised at most to 10 times the fixed bound: a spread past that is no bound at all.
            def raised(tol, spread):
                return max(tol, min(2 * spread, 10 * tol))
            loss_tol = raised(loss_tol, spread_loss)
            weight_bound = {n: raised(weight_tol, spread_errs[n]) for n in errs}
            if grad_errs is not None and spread_grads is not None:
                grad_bound = {n: raised(weight_tol, spread_grads[n]) for n in grad_errs}
            widened = sorted(n for n in errs if weight_bound[n] > weight_tol) + \
                sorted(n + " (gradient)" for n in grad_bound if grad_bound[n] > weight_tol)
            spread_words = (f"; {runs[0]} from weights perturbed ({len(spread_runs)} runs, the largest): "
                            f"losses {spread_loss:.1e}, "
                            f"weights {max(spread_errs.values()):.1e}, gradients "
                            f"{max((spread_grads or {0: 0.0}).values()):.1e}; bounds raised (twice that, at most 10x) for "
                            f"{widened[:4] or 'none'}")
    except (OSError, KeyError) as e:
        print(f"{name}: FAIL (missing output: {e})")
        return 1
    worst = max(errs, key=errs.get)
    ok = all(n == steps for n in lengths) and loss_err <= loss_tol and all(errs[n] <= weight_bound[n] for n in errs)
    grad_words = ""
    if grad_errs is not None:
        grad_worst = max(grad_errs, key=grad_errs.get)
        ok = ok and all(grad_errs[n] <= grad_bound[n] for n in grad_errs)
        grad_words = f", first-step gradients within {grad_errs[grad_worst]:.1e} (worst {grad_worst})"
    # Past the bound: the tensors over theirs (is it one tensor, or many?).
    over = sorted((n for n in errs if errs[n] > weight_bound[n]), key=errs.get, reverse=True)
    over = [n for n in over if n != worst][:2]
    over_words = "".join(f"; then {n} {errs[n]:.1e}" for n in over)
    print(f"{name}: {'ok' if ok else 'FAIL'} losses within {loss_err:.1e}, weights within {errs[worst]:.1e} "
          f"(worst {worst}{over_words}; {len(errs)} tensors, left out with zero gradient: {zero_grad or 'none'}; "
          f"{steps} steps, {runs[1]} vs {runs[0]}){grad_words}{spread_words}")
    return 0 if ok else 1


sys.exit(main())
