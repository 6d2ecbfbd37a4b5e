"""Supervised fine-tuning end to end, as a user does it (issue 16): a Qwen2 model folder with its
real tokenizer (Qwen's vocabulary of 151,936, the Qwen 3 tokenizer.json beside config.json and
the BF16 weights), instruction data in JSONL turned into a token file by `mttok --tokenizer
FOLDER --chat` (ChatML-style Qwen 3 template, a loss mask over the replies), compiled by
`mtc FOLDER` and trained by mtrun. The losses must follow a transformers-style PyTorch model of
the same folder trained with cross_entropy(ignore_index=-100) on the same batches and mask within
1e-4 over the steps, and mtrun's tokens_counted must be the mask's count per step. The folder
compiled for packed examples (mtc --packed-examples, mtrun --rows packed-examples) trains as that
model run on each conversation alone.
usage: /usr/bin/python3 tests/e2e/sft_pipeline.py BIN_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_folders as folders  # noqa: E402
import hf_twins as twins  # noqa: E402
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
# A linear decay after the warmup (the shape of Hugging Face's default schedule, here to 0.1 of the peak).
SCHEDULE = ref.Schedule(steps=6, lr=3e-3, warmup=2, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=11,
                        batch=2, seq=48, lr_schedule="linear")
SPEC = folders.CHAT_QWEN2


def instruction_data(path):
    """Conversations of every shape mttok reads, with replies of uneven lengths."""
    with open(path, "w", encoding="utf-8") as f:
        for i in range(24):
            if i % 3 == 0:
                e = {"instruction": f"Add {i} and {i * 3}.", "input": "", "output": f"{i} + {i * 3} = {i * 4}."}
            elif i % 3 == 1:
                e = {"messages": [{"role": "system", "content": "You answer in one sentence."},
                                  {"role": "user", "content": f"What is the colour of item {i}?"},
                                  {"role": "assistant", "content": "It is " + ["red", "green", "blue"][i % 3] + "."}]}
            else:
                e = {"conversations": [{"from": "human", "value": f"Say the word number {i} in French."},
                                       {"from": "gpt", "value": ["un", "deux", "trois", "quatre"][i % 4] + " !"}]}
            f.write(json.dumps(e, ensure_ascii=False) + "\n")


def packed_examples(bin_dir, weights, tokens, counted, failures):
    """The folder compiled for packed examples (mtc --packed-examples), trained with --rows
    packed-examples: whole conversations per row, each as if alone — against the transformers-style
    model run on each example alone, on the rows mtrun packs."""
    ref.run([f"{bin_dir}/mtc", "qwen", "--packed-examples", "--batch", str(SCHEDULE.batch), "--seq",
             str(SCHEDULE.seq), "-o", "p.plan", "--no-weights"])
    ref.run([f"{bin_dir}/mtrun", "p.plan", "--data", "sft.tok", "--weights", "m.safetensors", "--rows",
             "packed-examples", "--log", "p.jsonl", "--print-every", "3"] + SCHEDULE.mtrun_flags())
    rows = ref.PackedSampler(tokens, counted, ref.read_example_starts("sft.tok"), SCHEDULE.seed, SCHEDULE.batch,
                          SCHEDULE.seq)
    params = {k: v.float().requires_grad_() for k, v in weights.items()}
    torch_losses = ref.torch_train(
        params, lambda parts: ref.packed_logits(parts, SCHEDULE.seq, SPEC["config"]["vocab_size"], lambda x: twins.hf_logits(
            params, SPEC["config"], x[None])[0]), tokens, SCHEDULE, batch_of=rows.batch)
    worst = ref.compare_losses([json.loads(line)["loss"] for line in open("p.jsonl")], torch_losses, twins.LOSS_TOL,
                               failures)
    per_row = [len(rows.row(g)) for g in range(SCHEDULE.batch * SCHEDULE.steps)]
    print(f"packed examples ({per_row} per row): losses within {worst:.1e} of the model run on each example alone")
    if max(per_row) < 2:
        failures.append(f"packed examples: no row held two ({per_row}): the packing is untested")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    failures = []
    weights = folders.write_chat_folder("qwen")
    instruction_data("sft.jsonl")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--chat", "sft.jsonl", "-o", "sft.tok"])
    tokens, counted, vocab = ref.read_token_file("sft.tok")
    assert counted is not None, "mttok --chat wrote no loss mask"
    print(f"{len(tokens)} tokens, {int(counted.sum())} counted, vocabulary {vocab}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", "m.plan"])
    ref.run([f"{bin_dir}/mtrun", "m.plan", "--data", "sft.tok", "--log", "m.jsonl", "--print-every", "3"]
            + SCHEDULE.mtrun_flags())
    log = [json.loads(line) for line in open("m.jsonl")]
    want_counted = [int((ref.batch(tokens, s, SCHEDULE.batch, SCHEDULE.seq, SCHEDULE.seed, counted)[1] != -100).sum())
                    for s in range(SCHEDULE.steps)]
    got_counted = [line.get("tokens_counted") for line in log]
    if got_counted != want_counted:
        failures.append(f"tokens_counted {got_counted}, the mask counts {want_counted}")
    if not all(0 < c < SCHEDULE.batch * SCHEDULE.seq for c in want_counted):
        failures.append(f"counted targets per step {want_counted}: the mask is not exercised")
    params = {k: v.float().requires_grad_() for k, v in weights.items()}
    torch_losses = ref.torch_train(params, lambda x: twins.hf_logits(params, SPEC["config"], x), tokens, SCHEDULE,
                                   counted=counted)
    worst = ref.compare_losses([line["loss"] for line in log], torch_losses, twins.LOSS_TOL, failures)
    print(f"{SCHEDULE.steps} steps on the replies only ({want_counted} of {SCHEDULE.batch * SCHEDULE.seq} targets), "
          f"losses within {worst:.1e} of the transformers-style model")
    packed_examples(bin_dir, weights, tokens, counted, failures)
    # Issue 32: ids of another tokenizer mean other tokens to the model, though they fit its
    # vocabulary (Llama 3's 128,256 < Qwen's 151,936): the token file records its tokenizer, and
    # mtrun (and mtgen, for --tokenizer) refuse a mismatch, naming both, unless told.
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "llama3", "--chat", "sft.jsonl", "-o", "llama3.tok"])
    other = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "llama3.tok", "--steps", "1"],
                           capture_output=True, text=True)
    if other.returncode != 1 or "was made with another tokenizer" not in other.stderr or \
            "mttok --tokenizer " not in other.stderr:
        failures.append(f"a token file of another tokenizer: exit {other.returncode}: {other.stderr}")
    told = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "llama3.tok", "--steps", "1", "--other-tokenizer"],
                          capture_output=True, text=True)
    if told.returncode != 0:
        failures.append(f"--other-tokenizer: exit {told.returncode}: {told.stderr}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--forward-only", "--kv-cache", "--batch", "1", "--seq", "32", "-o", "g.plan"])
    gen = subprocess.run([f"{bin_dir}/mtgen", "g.plan", "--tokenizer", "llama3", "--prompt", "Hi", "--max-tokens", "2"],
                         capture_output=True, text=True)
    own = subprocess.run([f"{bin_dir}/mtgen", "g.plan", "--tokenizer", "qwen", "--prompt", "Hi", "--max-tokens", "2"],
                         capture_output=True, text=True)
    if gen.returncode != 1 or "--tokenizer llama3 was made with another tokenizer" not in gen.stderr or own.returncode != 0:
        failures.append(f"mtgen --tokenizer of another model: exit {gen.returncode} ({gen.stderr}); its own: exit "
                        f"{own.returncode} ({own.stderr})")
    # mtgen DIR: the folder compiled once into the cache (then reused), its tokenizer by default:
    # the same ids as the plan mtc makes of it; a folder mtc refuses leaves nothing in the cache.
    env = dict(os.environ, XDG_CACHE_HOME=os.path.abspath("cache"))
    want = subprocess.run([f"{bin_dir}/mtgen", "g.plan", "--tokenizer", "qwen", "--prompt", "Hi", "--max-tokens", "4",
                           "--greedy", "--ids", "--no-stop"], capture_output=True, text=True).stdout
    runs = [subprocess.run([f"{bin_dir}/mtgen", "qwen", "--context", "32", "--prompt", "Hi", "--max-tokens", "4",
                            "--greedy", "--ids", "--no-stop"], capture_output=True, text=True, env=env) for _ in range(2)]
    said = ["compiled now" in runs[0].stderr, "compiled before" in runs[1].stderr]
    if [r.stdout for r in runs] != [want, want] or not want.strip() or said != [True, True]:
        failures.append(f"mtgen DIR: ids {[r.stdout for r in runs]} vs the plan's {want!r}; compiled now/before {said}: "
                        f"{runs[0].stderr[-300:]}")
    # mtgen DIR --chat-file --batch 2: the folder's plan of 2 rows (a cache entry of its own) replies
    # to three conversations in the folder's template (Jinja2), two at once: the replies of one row.
    with open("held-out.jsonl", "w") as f:
        for question in ("Hi", "What is two and two?", "Name a colour."):
            f.write(json.dumps({"instruction": question, "output": "Fine."}) + "\n")
    replies = [subprocess.run([f"{bin_dir}/mtgen", "qwen", "--context", "64", "--batch", batch, "--chat-file",
                               "held-out.jsonl", "--max-tokens", "3", "--greedy", "--ids", "--no-stop"],
                              capture_output=True, text=True, env=env) for batch in ("1", "2")]
    rows = [[json.loads(line) for line in r.stdout.splitlines()] for r in replies]
    # The model's vocabulary is padded past its tokenizer's: a drawn id the tokenizer lacks has no
    # text (as transformers' decode), and mtgen says so.
    tokenizer = json.load(open("qwen/tokenizer.json"))
    known = 1 + max(list(tokenizer["model"]["vocab"].values()) + [t["id"] for t in tokenizer["added_tokens"]])
    unknown = any(i >= known for row in rows[0] for i in row["ids"])
    if (any(r.returncode != 0 for r in replies) or rows[0] != rows[1] or len(rows[0]) != 3
            or any(len(row["ids"]) != 3 or row["reference"] != "Fine." for row in rows[0])
            or ("left out of the text" in replies[0].stderr) != unknown):
        failures.append(f"mtgen DIR --chat-file at batch 1 and 2: {rows}; unknown ids {unknown}; "
                        f"{replies[0].stderr[-300:]}")
    # A prompt past the folder's --context: its --context named, as --chat and --chat-file alike.
    long_chat = subprocess.run([f"{bin_dir}/mtgen", "qwen", "--context", "32", "--chat", " ".join(["colour"] * 40),
                                "--max-tokens", "2"], capture_output=True, text=True, env=env)
    if long_chat.returncode != 1 or "Give mtgen --context of at least" not in long_chat.stderr:
        failures.append(f"mtgen DIR --chat past its --context: exit {long_chat.returncode}: {long_chat.stderr[-300:]}")
    os.makedirs("broken", exist_ok=True)
    with open("broken/config.json", "w") as f:
        json.dump({"architectures": ["NoSuchForCausalLM"], "model_type": "nosuch"}, f)
    broken = subprocess.run([f"{bin_dir}/mtgen", "broken", "--prompt", "Hi", "--bytes"], capture_output=True, text=True,
                            env=env)
    left = sorted(os.listdir("cache/megatrain/mtgen"))  # the three plans above, nothing of the broken one
    if broken.returncode != 1 or "mtc could not compile broken" not in broken.stderr or len(left) != 3:
        failures.append(f"mtgen of a folder mtc refuses: exit {broken.returncode}, {broken.stderr[-300:]}; cache {left}")
    ref.finish("sft_pipeline", failures)


if __name__ == "__main__":
    main()
