"""Generation (issue 16): mtc --forward-only plans and mtgen. A GPT-2 and a Llama built-in model
are trained by mtrun on a small repetitive corpus; then, from the exported weights, mtgen's greedy
continuation of a prompt must be the token-for-token greedy continuation of the PyTorch twin
(mt_reference.forward over the unpadded prefix, where mtgen runs a fixed window padded after the
text), and for the GPT-2 model reproduce the corpus; the continuation longer than the window
(the window then slides) must still match. Sampling: the same seed gives the same text, another
seed another; a plan of batch 3 gives three samples, alike when greedy; a training plan is
refused. The decode plans (mtc --kv-cache: one token's forward per token over a key/value cache)
must give the window plan's greedy tokens while the text fits the window, and past it the
tokens of a PyTorch twin that restarts from the text's last window/2 tokens when the cache is
full, as mtgen rebuilds it. usage: /usr/bin/python3 tests/e2e/generate.py BIN_DIR WORK_DIR
"""
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
LINE = "the cat sat on the mat. the dog ran in the fog.\n"
MODELS = {
    "gpt2-tiny": dict(family="gpt2", layers=2, width=64, heads=4, kv_heads=4, tied=True),
    "llama-tiny": dict(family="llama", layers=2, width=64, heads=4, kv_heads=2, tied=False),
}
WINDOW = 48


def mtgen(bin_dir, *args):
    out = subprocess.run([f"{bin_dir}/mtgen", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mtgen {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def torch_greedy(params, cfg, prompt, steps, window):
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(steps):
            context = torch.tensor([tokens[-window:]])
            tokens.append(int(ref.forward(params, cfg, context)[0, -1].argmax()))
    return tokens[len(prompt):]


def torch_greedy_cached(params, cfg, prompt, steps, window):
    """mtgen's decode plan: the context grows from `start` until it outgrows the cache, then
    restarts from the text's last window // 2 tokens."""
    tokens = list(prompt)
    start = max(0, len(tokens) - window)
    with torch.no_grad():
        for _ in range(steps):
            context = torch.tensor([tokens[start:]])
            tokens.append(int(ref.forward(params, cfg, context)[0, -1].argmax()))
            if len(tokens) - start > window:
                start = len(tokens) - window // 2
    return tokens[len(prompt):]


def first_difference(got, want):
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return f"from token {first}: {got[first:first + 8]} vs {want[first:first + 8]}"


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    failures = []
    with open("corpus.txt", "w") as f:
        f.write(LINE * 300)
    ref.run([f"{bin_dir}/mttok", "--bytes", "corpus.txt", "-o", "corpus.tok"])
    prompt = "the cat"
    for name, cfg in MODELS.items():
        ref.run([f"{bin_dir}/mtc", name, "--batch", "8", "--seq", "64", "-o", f"{name}.plan"])
        ref.run([f"{bin_dir}/mtrun", f"{name}.plan", "--data", "corpus.tok", "--steps", "200", "--lr", "3e-3",
                 "--print-every", "60", "--export", f"{name}.trained.safetensors"])
        ref.run([f"{bin_dir}/mtc", name, "--forward-only", "--batch", "1", "--seq", str(WINDOW), "-o", f"{name}.gen.plan"])
        weights = ["--weights", f"{name}.trained.safetensors"]
        steps = 2 * WINDOW  # past the window: it slides
        ids = [int(t) for t in mtgen(bin_dir, f"{name}.gen.plan", *weights, "--prompt", prompt, "--greedy",
                                     "--max-tokens", str(steps), "--ids").split()]
        params = ref.read_safetensors(f"{name}.trained.safetensors")
        want = torch_greedy(params, cfg, list(prompt.encode()), steps, WINDOW)
        if ids != want:
            failures.append(f"{name}: greedy tokens differ from PyTorch's {first_difference(ids, want)}")
        # The decode plan: the window plan's tokens while the text fits, then the cached twin's.
        ref.run([f"{bin_dir}/mtc", name, "--forward-only", "--kv-cache", "--batch", "1", "--seq", str(WINDOW),
                 "--no-weights", "-o", f"{name}.kv.plan"])
        kv_ids = [int(t) for t in mtgen(bin_dir, f"{name}.kv.plan", *weights, "--prompt", prompt, "--greedy",
                                        "--max-tokens", str(steps), "--ids").split()]
        fits = WINDOW - len(prompt)
        if kv_ids[:fits] != ids[:fits]:
            failures.append(f"{name}: the decode plan's greedy tokens differ from the window plan's "
                            f"{first_difference(kv_ids[:fits], ids[:fits])}")
        want_kv = torch_greedy_cached(params, cfg, list(prompt.encode()), steps, WINDOW)
        if kv_ids != want_kv:
            failures.append(f"{name}: the decode plan's greedy tokens differ from the cached PyTorch twin's "
                            f"{first_difference(kv_ids, want_kv)}")
        print(f"{name}: decode plan {len(kv_ids)} greedy tokens as PyTorch's ({fits} as the window plan's)")
        text = mtgen(bin_dir, f"{name}.gen.plan", *weights, "--prompt", prompt, "--greedy", "--max-tokens", "60")
        print(f"{name} greedy: {text!r}")
        if name == "gpt2-tiny" and not text.startswith((LINE * 3)[:len(prompt) + 50]):
            failures.append(f"{name}: the greedy text does not reproduce the corpus: {text!r}")
        sampled = [mtgen(bin_dir, f"{name}.gen.plan", *weights, "--prompt", "the ", "--temperature", "1.5",
                         "--seed", str(seed), "--max-tokens", "40") for seed in (1, 1, 2)]
        if sampled[0] != sampled[1]:
            failures.append(f"{name}: seed 1 gave two texts: {sampled[0]!r} and {sampled[1]!r}")
        if sampled[0] == sampled[2]:
            failures.append(f"{name}: seeds 1 and 2 gave the same text at temperature 1.5: {sampled[0]!r}")

    # Three samples at once: greedy ones are alike.
    ref.run([f"{bin_dir}/mtc", "gpt2-tiny", "--forward-only", "--batch", "3", "--seq", str(WINDOW), "-o", "b3.plan"])
    out = mtgen(bin_dir, "b3.plan", "--weights", "gpt2-tiny.trained.safetensors", "--prompt", prompt, "--greedy",
                "--max-tokens", "20")
    samples = [s for s in out.split("--- sample ") if s]
    if len(samples) != 3 or len({s.split("\n", 1)[1] for s in samples}) != 1:
        failures.append(f"batch 3 greedy: {len(samples)} samples, not three alike: {out!r}")
    ref.run([f"{bin_dir}/mtc", "gpt2-tiny", "--forward-only", "--kv-cache", "--batch", "3", "--seq", str(WINDOW),
             "--no-weights", "-o", "kv3.plan"])
    drawn = [mtgen(bin_dir, "kv3.plan", "--weights", "gpt2-tiny.trained.safetensors", "--prompt", "the ",
                   "--temperature", "1.5", "--seed", "3", "--max-tokens", "30") for _ in range(2)]
    rows = [s.split("\n", 1)[1] for s in drawn[0].split("--- sample ") if s]
    if drawn[0] != drawn[1] or len(rows) != 3 or len(set(rows)) != 3:
        failures.append(f"decode plan, batch 3 at temperature 1.5: not three distinct samples, reproducibly: {drawn!r}")
    refused = subprocess.run([f"{bin_dir}/mtgen", "gpt2-tiny.plan", "--prompt", "x"], capture_output=True, text=True)
    if refused.returncode != 1 or "not a forward-only plan" not in refused.stderr:
        failures.append(f"mtgen on a training plan: exit {refused.returncode}, {refused.stderr!r}")
    ref.finish("generate", failures)


if __name__ == "__main__":
    main()
