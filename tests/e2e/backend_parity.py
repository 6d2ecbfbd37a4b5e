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
weights within 5e-2; --tol LOSS,WEIGHT sets both. Prints one line; exits 1 on a mismatch.
usage: backend_parity.py PREFIX STEPS [A B] [--bf16 | --tol LOSS,WEIGHT]   (A B: cpu cuda; used by
tests/e2e/cuda_parity.sh, bench/gpu/run.sh, tests/e2e/vocab_split.sh and token_tiles.sh)"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

LOSS_TOL, WEIGHT_TOL = 1e-4, 1e-3


def main():
    bf16 = "--bf16" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--bf16"]
    loss_tol, weight_tol = (1e-2, 5e-2) if bf16 else (LOSS_TOL, WEIGHT_TOL)
    if "--tol" in args:
        at = args.index("--tol")
        loss_tol, weight_tol = (float(x) for x in args[at + 1].split(","))
        del args[at:at + 2]
    prefix, steps = args[0], int(args[1])
    runs = tuple(args[2:4]) if len(args) >= 4 else ("cpu", "cuda")
    name = os.path.basename(prefix)
    try:
        losses = [[json.loads(line)["loss"] for line in open(f"{prefix}.{b}.jsonl")] for b in runs]
        weights = [ref.read_safetensors(f"{prefix}.{b}.safetensors") for b in runs]
        grads = ref.read_safetensors(f"{prefix}.{runs[0]}.grads.safetensors")
    except OSError as e:
        print(f"{name}: FAIL (missing output: {e})")
        return 1
    total = sum(float(g.norm()) ** 2 for g in grads.values()) ** 0.5
    # Analytically zero: fp32 sums leave ~1e-8 of the total norm in such a gradient, bf16's
    # roundings ~2e-7 (gpt2-tiny-mixed's key biases; its smallest real gradient, the query bias,
    # is 2e-4 of the total).
    # A LoRA A's first-step gradient is zero too (B starts at zero), but it trains from the second
    # step: it is compared.
    zero_grad = sorted(n for n, g in grads.items()
                       if float(g.norm()) <= (1e-5 if bf16 else 1e-7) * total and ".lora_A." not in n)
    loss_err = max((abs(a - b) / abs(a) for a, b in zip(*losses)), default=float("inf"))
    errs = {n: ref.rel_err(weights[1][n], w) for n, w in weights[0].items() if n not in zero_grad}
    worst = max(errs, key=errs.get)
    ok = all(len(run) == steps for run in losses) and loss_err <= loss_tol and errs[worst] <= weight_tol
    grads_b = f"{prefix}.{runs[1]}.grads.safetensors"
    grad_words = ""
    if os.path.exists(grads_b):
        other = ref.read_safetensors(grads_b)
        grad_errs = {n: ref.rel_err(other[n], g) for n, g in grads.items() if n not in zero_grad}
        grad_worst = max(grad_errs, key=grad_errs.get)
        ok = ok and grad_errs[grad_worst] <= weight_tol
        grad_words = f", first-step gradients within {grad_errs[grad_worst]:.1e} (worst {grad_worst})"
    # Past the bound: the next worst weights too (is it one tensor, or many?).
    over = sorted((n for n in errs if errs[n] > weight_tol), key=errs.get, reverse=True)[1:3]
    over_words = "".join(f"; then {n} {errs[n]:.1e}" for n in over)
    print(f"{name}: {'ok' if ok else 'FAIL'} losses within {loss_err:.1e}, weights within {errs[worst]:.1e} "
          f"(worst {worst}{over_words}; {len(errs)} tensors, left out with zero gradient: {zero_grad or 'none'}; "
          f"{steps} steps, {runs[1]} vs {runs[0]}){grad_words}")
    return 0 if ok else 1


sys.exit(main())
