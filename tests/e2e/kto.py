"""KTO end to end, as a user does it: unpaired feedback in the shapes TRL's KTOTrainer reads (a
string prompt and completion with a boolean label, message lists, and preference records, which
give two: the chosen reply desirable, the rejected one not) turned by `mttok --tokenizer FOLDER
--unpaired` into labelled examples, each beside its KL row (its prompt with another prompt's
completion, from half the inputs away); a Qwen2 folder compiled by `mtc FOLDER --objective kto` and trained by mtrun. The
losses, the KL estimate and the rewards and log-probabilities of each kind of example must follow a
transformers-style PyTorch model of the same folder trained with TRL's KTO loss on the same rows
(its formula: kl = (policy_KL_logps - reference_KL_logps).mean().clamp(min=0), no gradient;
1 - sigmoid(beta (c - kl)) for a desirable example, 1 - sigmoid(beta (kl - c)) for an undesirable
one, weighted, their mean) within 1e-4, as must the held-out examples' score; with unequal weights
too. Two ranks log what --accumulate 2 logs, and a resumed run the straight run's later steps, bit
for bit; mtrun --eval-only on the last checkpoint logs the run's last validation, bit for bit. A DPO plan on KTO's data, a KTO plan on
DPO's pairs, a next-token plan on KTO's data, a file of one example and a label that is not a
boolean are refused by name.
usage: /usr/bin/python3 tests/e2e/kto.py BIN_DIR WORK_DIR
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_folders as folders  # noqa: E402
import hf_twins as twins  # noqa: E402
import mt_reference as ref  # noqa: E402

torch.set_num_threads(2)
BETA = 0.5
SCHEDULE = ref.Schedule(steps=8, lr=3e-3, warmup=1, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=3,
                        batch=4, seq=40, lr_schedule="linear")
SPEC = folders.CHAT_QWEN2


def feedback(path, items=range(9)):
    """Unpaired records in their shapes, and a preference record every third: mostly desirable, so
    that training raises the completions and with them the KL rows' (the estimate above 0)."""
    labels = []
    with open(path, "w", encoding="utf-8") as f:
        for i in items:
            good, bad = f"{i} + {i} = {2 * i}.", f"It is {2 * i + 1}, I believe, or perhaps not."
            if i % 3 == 0:
                record = {"prompt": f"Double {i}.", "chosen": good, "rejected": bad}
                labels += [1, 0]
            elif i % 3 == 1:
                record = {"prompt": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": f"Double {i}."}],
                          "completion": [{"role": "assistant", "content": good}], "label": True}
                labels.append(1)
            else:
                record = {"prompt": f"Double {i}, please.", "completion": good, "label": True}
                labels.append(1)
            f.write(json.dumps(record) + "\n")
    return labels


def read_labels(path):
    """A version-5 token file's labels, one per (example, KL row) pair."""
    with open(path, "rb") as f:
        data = f.read()
    version, width, count = struct.unpack("<IIQ", data[8:24])
    assert version == 5, f"{path} is version {version}, not 5 (labelled pairs)"
    at = 32 + count * (width + 1)
    (n,) = struct.unpack("<Q", data[at:at + 8])
    return list(data[at + 8 + 8 * n:])


def rows_of(tokens, counted, starts, examples):
    return ref.example_rows(tokens, counted, starts, examples, SCHEDULE.seq)


def kto_loss(policy, reference, labels, beta, desirable=1.0, undesirable=1.0):
    """TRL's KTOTrainer.kto_loss (loss_type "kto") of rows in (example, KL row) pairs, then nanmean;
    with the KL estimate."""
    kl = (policy[1::2] - reference[1::2]).mean().detach().clamp(min=0)
    c = (policy[0::2] - reference[0::2])[labels]
    r = (policy[0::2] - reference[0::2])[~labels]
    losses = torch.cat((desirable * (1 - torch.sigmoid(beta * (c - kl))),
                        undesirable * (1 - torch.sigmoid(beta * (kl - r)))), 0)
    return losses.nanmean(), kl.item()


def scores(policy, reference, labels, beta, kl):
    """What mtrun logs beside the loss: kl, then the desirable and undesirable examples' mean rewards
    and log-probabilities (None where there are none of a kind), as TRL's KTOTrainer logs them."""
    rewards, logps = beta * (policy[0::2] - reference[0::2]).detach(), policy[0::2].detach()
    mean = lambda x, m: x[m].mean().item() if m.any() else None  # noqa: E731
    return (kl, mean(rewards, labels), mean(rewards, ~labels), mean(logps, labels), mean(logps, ~labels))


def torch_kto(weights, data, held, beta=BETA, desirable=1.0, undesirable=1.0):
    """The transformers-style model trained with TRL's KTO loss on mtrun's rows: the losses, each
    step's scores, and after the last step the held-out examples' (loss, scores)."""
    tokens, counted, starts, labels = data
    params = {k: v.float().requires_grad_() for k, v in weights.items()}
    logits_of = lambda x: twins.hf_logits(params, SPEC["config"], x)  # noqa: E731

    def logps(d, model):  # every example of (tokens, counted, starts, labels)
        x, y = rows_of(*d[:3], range(len(d[2])))
        with torch.no_grad():
            return ref.sequence_logps(twins.hf_logits(model, SPEC["config"], x), y)

    frozen = {k: v.float() for k, v in weights.items()}
    reference, held_reference = logps(data, frozen), logps(held, frozen)
    drawn = [[ref.pair_example(starts, step, row, SCHEDULE.seed) for row in range(SCHEDULE.batch)]
             for step in range(SCHEDULE.steps)]
    logged = []

    def loss_of(logits, y, step):
        policy, ref_logps = ref.sequence_logps(logits, y), reference[drawn[step]]
        step_labels = torch.tensor([bool(labels[e // 2]) for e in drawn[step][0::2]])
        loss, kl = kto_loss(policy, ref_logps, step_labels, beta, desirable, undesirable)
        logged.append(scores(policy, ref_logps, step_labels, beta, kl))
        return loss

    losses = ref.torch_train(params, logits_of, tokens, SCHEDULE, loss_of=loss_of,
                             batch_of=lambda s: rows_of(tokens, counted, starts, drawn[s]))
    # Held out, batch by batch as mtrun (and TRL's evaluation) scores them: each batch's own KL
    # estimate; the loss and scores over every example, the KL over the batches.
    policy, examples = logps(held, params), SCHEDULE.batch // 2
    held_labels = torch.tensor([bool(v) for v in held[3]])
    total, kls = 0.0, []
    for first in range(0, len(held_labels), examples):
        rows, batch_labels = slice(2 * first, 2 * (first + examples)), held_labels[first:first + examples]
        loss, kl = kto_loss(policy[rows], held_reference[rows], batch_labels, beta, desirable, undesirable)
        total, kls = total + loss.item() * len(batch_labels), kls + [kl]
    rest = scores(policy, held_reference, held_labels, beta, 0.0)[1:]
    return losses, logged, (total / len(held_labels), sum(kls) / len(kls)) + rest


def close(got, want):
    """Whether two tuples of scores agree within 1e-4 (relative past 1), None where the other is."""
    return len(got) == len(want) and all((g is None) == (w is None) and (g is None or abs(g - w) <= 1e-4 * max(1.0, abs(w)))
                                         for g, w in zip(got, want))


def train_and_compare(bin_dir, name, flags, weights, data, held, failures, **twin):
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "kto", "--beta", str(BETA), "--batch", str(SCHEDULE.batch),
             "--seq", str(SCHEDULE.seq), "-o", f"{name}.plan"] + flags)
    ref.run([f"{bin_dir}/mtrun", f"{name}.plan", "--data", "kto.tok", "--log", f"{name}.jsonl", "--val-data", "held.tok",
             "--val-every", str(SCHEDULE.steps), "--checkpoint-dir", f"{name}-ck", "--checkpoint-every", "5"]
            + SCHEDULE.mtrun_flags())
    lines = [json.loads(line) for line in open(f"{name}.jsonl")]
    log, val = [line for line in lines if "val_loss" not in line], [line for line in lines if "val_loss" in line]
    torch_losses, logged, validation = torch_kto(weights, data, held, **twin)
    worst = ref.compare_losses([line["loss"] for line in log], torch_losses, twins.LOSS_TOL, failures)
    keys = ("kl", "reward_chosen", "reward_rejected", "logps_chosen", "logps_rejected")
    got = [tuple(line.get(k) for k in keys) for line in log]
    for step, (g, w) in enumerate(zip(got, logged)):
        if not close(g, w):
            failures.append(f"{name} step {step + 1}: (kl, rewards, logps) {g}, the model's {w}")
    got_val = tuple(val[0].get("val_" + k) for k in ("loss",) + keys) if val else ()
    if not close(got_val, validation) or not val or val[0].get("val_examples") != len(held[3]):
        failures.append(f"{name} held out: {val}, the model's {validation}")
    print(f"{name}: {SCHEDULE.steps} KTO steps within {worst:.1e} of TRL's loss; kl each step "
          f"{[line['kl'] for line in log]}")
    return log


def evaluated(bin_dir, held_labels, failures):
    """mtrun --eval-only on the run's last checkpoint (its held-out reference read back from the
    folder): the run's last validation, bit for bit, and the folder left as it was. Its --scores:
    each held-out example's line, in order, labelled as the data, the losses' mean the logged loss,
    the desirable ones' mean reward the logged one. Two ranks (mpirun) write one process's file, of
    7 examples in 4 batches (the last padded), so that the ranks' shares interleave."""
    before = sorted(os.listdir("k-ck"))
    cmd = [f"{bin_dir}/mtrun", "k.plan", "--data", "kto.tok", "--val-data", "held.tok", "--resume", "k-ck",
           "--eval-only"]
    ref.run(cmd + ["--log", "evaluated.jsonl", "--scores", "scores.jsonl"])
    validation = [line for line in map(json.loads, open("k.jsonl")) if "val_loss" in line]
    got = [json.loads(line) for line in open("evaluated.jsonl")]
    if got != validation[-1:] or sorted(os.listdir("k-ck")) != before:
        failures.append(f"--eval-only of the step-{SCHEDULE.steps} checkpoint: {got}, the run's last validation "
                        f"{validation[-1:]}; the folder {before} -> {sorted(os.listdir('k-ck'))}")
        return
    scores = [json.loads(line) for line in open("scores.jsonl")]
    desirable = [s["reward"] for s in scores if s["desirable"]]
    if [s["example"] for s in scores] != list(range(len(held_labels))) or \
            [s["desirable"] for s in scores] != [bool(v) for v in held_labels] or \
            not close((sum(s["loss"] for s in scores) / len(scores), sum(desirable) / len(desirable)),
                      (got[0]["val_loss"], got[0]["val_reward_chosen"])):
        failures.append(f"--eval-only --scores: {scores}; the evaluation {got[0]}, the labels {list(held_labels)}")
    labels = feedback("held7.jsonl", range(20, 25))
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "held7.jsonl", "-o", "held7.tok"])
    cmd = [f"{bin_dir}/mtrun", "k.plan", "--data", "held7.tok", "--eval-only", "--weights",
           f"k-ck/step-{SCHEDULE.steps:09d}.ckpt.safetensors", "--reference-weights", "k.safetensors", "--scores"]
    ref.run(cmd + ["scores7.jsonl"])
    ranks, why = ref.two_ranks(cmd + ["scores7-np2.jsonl"])
    seven = [json.loads(line) for line in open("scores7.jsonl")]
    if [(s["example"], s["desirable"]) for s in seven] != [(e, bool(v)) for e, v in enumerate(labels)] or len(seven) != 7:
        failures.append(f"--eval-only --scores of 7 examples: {seven}; labels {labels}")
    if ranks is None:
        print(f"kto: the two ranks' --scores not checked: {why}")
    elif open("scores7-np2.jsonl").read() != open("scores7.jsonl").read():
        failures.append("--eval-only --scores by mpirun -np 2 differs from one process's")


def resumed(bin_dir, log, failures):
    """The run resumed from its step-5 checkpoint (the reference read back, the labels from the
    data again): the straight run's later losses and KL estimates, bit for bit."""
    os.remove(f"k-ck/step-{SCHEDULE.steps:09d}.ckpt.safetensors")
    ref.run([f"{bin_dir}/mtrun", "k.plan", "--data", "kto.tok", "--resume", "k-ck", "--log", "resumed.jsonl"]
            + SCHEDULE.mtrun_flags())
    later = [(line["loss"], line["kl"]) for line in map(json.loads, open("resumed.jsonl"))]
    if later != [(line["loss"], line["kl"]) for line in log[5:]]:
        failures.append(f"resumed after step 5: {later}, the straight run's {log[5:]}")


def refusals(bin_dir, failures):
    """What does not fit is refused by name, nothing written."""
    def expect(cmd, says, what, written=None):
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode == 0 or says not in done.stderr or (written and os.path.exists(written)):
            failures.append(f"{what}: exit {done.returncode}: {done.stderr[-400:]}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--batch", "4", "--seq", "40", "-o", "dpo.plan"])
    expect([f"{bin_dir}/mtrun", "dpo.plan", "--data", "kto.tok", "--steps", "1"], "compile the plan with mtc --objective kto",
           "a DPO plan on KTO's data")
    with open("pairs.jsonl", "w") as f:
        f.write(json.dumps({"prompt": "Hi", "chosen": "Hello.", "rejected": "No."}) + "\n")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "pairs.jsonl", "-o", "pairs.tok"])
    expect([f"{bin_dir}/mtrun", "k.plan", "--data", "pairs.tok", "--steps", "1"], "tokenise the data with mttok --unpaired",
           "a KTO plan on DPO's pairs")
    with open("one.jsonl", "w") as f:
        f.write(json.dumps({"prompt": "Hi", "completion": "Hello.", "label": True}) + "\n")
    expect([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "one.jsonl", "-o", "one.tok"],
           "KTO needs two or more", "a file of one example", "one.tok")
    with open("bad.jsonl", "w") as f:
        f.write(json.dumps({"prompt": "Hi", "completion": "Hello.", "label": True}) + "\n")
        f.write(json.dumps({"prompt": "Hi", "completion": "Hello.", "label": "yes"}) + "\n")
    expect([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "bad.jsonl", "-o", "bad.tok"],
           "bad.jsonl:2: \"label\" is \"yes\", not true (desirable) or false", "a label that is not a boolean", "bad.tok")
    expect([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--desirable-weight", "2", "-o", "w.plan"],
           "--desirable-weight weighs KTO's examples", "--desirable-weight with --objective dpo", "w.plan")
    ref.run([f"{bin_dir}/mtc", "qwen", "--batch", "4", "--seq", "40", "-o", "m.plan"])
    expect([f"{bin_dir}/mtrun", "m.plan", "--data", "kto.tok", "--steps", "1"],
           "would learn the undesirable completions too", "KTO's data on a next-token plan")


def data_parallel(bin_dir, failures):
    """mpirun -np 2 (the reference and the labels shared out, each rank's micro-batch its own KL
    estimate, the log's kl their mean) logs what --accumulate 2 in one process logs, bit for bit."""
    common = [f"{bin_dir}/mtrun", "k.plan", "--data", "kto.tok", "--val-data", "held.tok", "--val-every", "3",
              "--steps", "3", "--seed", "3", "--lr", "3e-2"]
    lines, why = ref.ranks_against_accumulate(common)
    if not lines or lines[0] != lines[1] or not any(line.get("kl", 0) > 0 for line in lines[0]):
        failures.append(f"mpirun -np 2 ({why}) against --accumulate 2, a KL estimate above 0 somewhere: {lines}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    failures = []
    weights = folders.write_chat_folder("qwen", own_template=True)
    labels = feedback("feedback.jsonl")
    held_labels = feedback("held.jsonl", range(20, 23))
    out = subprocess.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "feedback.jsonl", "-o", "kto.tok"],
                         check=True, capture_output=True, text=True).stdout
    print(out, end="")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "held.jsonl", "-o", "held.tok"])
    tokens, counted, _ = ref.read_token_file("kto.tok")
    starts = ref.read_example_starts("kto.tok")
    n = len(labels)
    if read_labels("kto.tok") != labels or len(starts) != 2 * n or f"{n} labelled examples" not in out or \
            f"{labels.count(1)} desirable and {labels.count(0)} undesirable" not in out:
        failures.append(f"mttok --unpaired: labels {read_labels('kto.tok')}, want {labels}; {len(starts)} examples: {out}")
    # Example i's KL row: its prompt, then the completion of the first example from (i + n/2) mod n on
    # whose prompt is another (a preference record's two examples share theirs).
    rows = [ref.example_row(tokens, counted, starts, e, 64) for e in range(2 * n)]
    first = [int(np.argmax(y != -100)) for _, y in rows]
    prompt = lambda e: list(rows[e][0][:first[e] + 1])  # noqa: E731
    completion = lambda e: [int(t) for t, c in zip(rows[e][0][first[e] + 1:], rows[e][1][first[e]:]) if c != -100]  # noqa: E731
    for i in range(n):
        source = next(j for j in ((i + n // 2 + k) % n for k in range(n)) if prompt(2 * j) != prompt(2 * i))
        if prompt(2 * i + 1) != prompt(2 * i) or completion(2 * i + 1) != completion(2 * source):
            failures.append(f"example {i}'s KL row is not its prompt with example {source}'s completion")
    data = (tokens, counted, starts, labels)
    held = ref.read_token_file("held.tok")[:2] + (ref.read_example_starts("held.tok"), held_labels)
    log = train_and_compare(bin_dir, "k", [], weights, data, held, failures)
    if abs(log[0]["loss"] - 0.5) > 1e-6 or not any(line["kl"] > 0 for line in log):
        failures.append(f"KTO: first loss {log[0]['loss']} (1 - sigmoid(0) = 0.5 at the reference), kl "
                        f"{[line['kl'] for line in log]} (never above 0: the estimate untested)")
    train_and_compare(bin_dir, "weighted", ["--desirable-weight", "0.75", "--undesirable-weight", "1.5"], weights, data,
                      held, failures, desirable=0.75, undesirable=1.5)
    evaluated(bin_dir, held_labels, failures)
    resumed(bin_dir, log, failures)
    refusals(bin_dir, failures)
    data_parallel(bin_dir, failures)
    ref.finish("kto", failures)


if __name__ == "__main__":
    main()
