"""Generation (issue 16): mtc --forward-only plans and mtgen. A GPT-2 and a Llama built-in model
are trained by mtrun on a small repetitive corpus; then, from the exported weights, mtgen's greedy
continuation of a prompt must be the token-for-token greedy continuation of the PyTorch twin
(mt_reference.forward over the unpadded prefix, where mtgen runs a fixed window padded after the
text), and for the GPT-2 model reproduce the corpus; the continuation longer than the window
(the window then slides) must still match. Sampling: the same seed gives the same text, another
seed another; a plan of batch 3 gives three samples, alike when greedy; a training plan is
refused. usage: /usr/bin/python3 tests/e2e/generate.py BIN_DIR WORK_DIR
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
            first = next((i for i, (a, b) in enumerate(zip(ids, want)) if a != b), min(len(ids), len(want)))
            failures.append(f"{name}: greedy tokens differ from PyTorch's from token {first}: "
                            f"{ids[first:first + 8]} vs {want[first:first + 8]}")
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
    refused = subprocess.run([f"{bin_dir}/mtgen", "gpt2-tiny.plan", "--prompt", "x"], capture_output=True, text=True)
    if refused.returncode != 1 or "not a forward-only plan" not in refused.stderr:
        failures.append(f"mtgen on a training plan: exit {refused.returncode}, {refused.stderr!r}")
    ref.finish("generate", failures)


if __name__ == "__main__":
    main()
