"""A reward model end to end, as a user trains one: preference pairs through `mttok --tokenizer FOLDER
--preferences`, a Qwen2 folder compiled by `mtc FOLDER --objective reward` (its LM head replaced by
a score head of one output, seeded, as Hugging Face's Qwen2ForSequenceClassification with
num_labels 1 starts from a causal LM) and trained by mtrun. Each row's reward is its score at the
example's last token before the end-of-text token mttok appends (where a classifier reads the last
token before the padding). The losses, and each step's accuracy, margin and mean rewards, must
follow a transformers-style PyTorch model of the same folder with that head, trained with TRL's
RewardTrainer loss (-logsigmoid(r_c - r_r).mean(), plus center_rewards_coefficient times
mean((r_c + r_r)^2)) on the same pairs, within 1e-4; the held-out pairs' score too. A built-in
GPT-2's reward model trains from a next-token run's export (its score head new). A reward plan on
KTO's data is refused by name.
mtrun --export-hf writes a reward model as Hugging Face's ...ForSequenceClassification (one label;
pad_token_id the end-of-text token, so that transformers' rule, each row's score at its last token
that is not padding, reads the rewards mtrun reads: the held-out pairs' score from the exported
folder by that rule is the run's last validation); mtc compiles such a folder back (--objective
reward, its score head its own) to the run's weights bit for bit, and refuses it without
--objective reward; mtrun --eval-only scores that plan on the held-out pairs as the run's last
validation did, bit for bit. A LoRA reward model's adapter goes to PEFT's SEQ_CLS form
(--export-peft) and back (mtc --objective reward --lora-from) to the bit.
usage: /usr/bin/python3 tests/e2e/reward.py BIN_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_folders as folders  # noqa: E402
import hf_twins as twins  # noqa: E402
import mt_reference as ref  # noqa: E402
from preference import preference_data  # noqa: E402

torch.set_num_threads(2)
SCHEDULE = ref.Schedule(steps=6, lr=3e-3, warmup=1, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=3,
                        batch=4, seq=40, lr_schedule="linear")
SPEC = folders.CHAT_QWEN2


def reward_position(starts, total, e, seq):
    """mtrun's position of example e's reward: its last token before the end-of-text token (the
    row's last where the example is cut)."""
    length = (starts[e + 1] if e + 1 < len(starts) else total) - starts[e]
    return max(length - 2, 0) if length <= seq else seq - 1


def reward_loss(rewards, center, margins=None):
    """TRL's RewardTrainer.compute_loss of rows in (chosen, rejected) pairs (with the pairs'
    "margin" column where given)."""
    chosen, rejected = rewards[0::2], rewards[1::2]
    if margins is not None:
        loss = -torch.nn.functional.logsigmoid(chosen - rejected - margins).mean()
    else:
        loss = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
    if center:
        loss = loss + center * torch.mean((chosen + rejected) ** 2)
    return loss


def scores(rewards):
    """What mtrun logs beside the loss: accuracy, margin, the mean chosen and rejected rewards."""
    chosen, rejected = rewards[0::2].detach(), rewards[1::2].detach()
    return ((chosen > rejected).double().mean().item(), (chosen - rejected).mean().item(), chosen.mean().item(),
            rejected.mean().item())


def torch_reward(weights, score, data, held, center, margins=None):
    """The transformers-style model with the score head, trained with TRL's loss on mtrun's pairs
    (with each pair's margin, `margins`, where given): the losses, each step's scores, and after
    the last step the held-out pairs' (loss, scores)."""
    tokens, counted, starts = data
    params = {k: v.float().requires_grad_() for k, v in weights.items()}
    params["lm_head.weight"] = score.clone().requires_grad_()  # the head: hf_logits' untied output projection
    config = dict(SPEC["config"], tie_word_embeddings=False)

    def rows_of(d, rows):  # the rows' tokens, and each one's reward position
        x, _ = ref.example_rows(*d, rows, SCHEDULE.seq)
        return x, torch.tensor([reward_position(d[2], len(d[0]), e, SCHEDULE.seq) for e in rows])

    def rewards_of(scores_, positions):  # each row's score (B, T, 1) at its position
        return scores_[torch.arange(len(positions)), positions, 0]

    drawn = [[ref.pair_example(starts, step, row, SCHEDULE.seed) for row in range(SCHEDULE.batch)]
             for step in range(SCHEDULE.steps)]
    logged = []

    def loss_of(scores_, positions, step):
        rewards = rewards_of(scores_, positions)
        logged.append(scores(rewards))
        pairs = None if margins is None else torch.tensor([margins[e // 2] for e in drawn[step][0::2]])
        return reward_loss(rewards, center, pairs)

    logits_of = lambda x: twins.hf_logits(params, config, x, score_head=True)  # noqa: E731
    losses = ref.torch_train(params, logits_of, tokens, SCHEDULE, loss_of=loss_of,
                             batch_of=lambda s: rows_of(data, drawn[s]))
    x, positions = rows_of(held, range(len(held[2])))
    with torch.no_grad():
        rewards = rewards_of(logits_of(x), positions)
    return losses, logged, (reward_loss(rewards, center).item(),) + scores(rewards)


def close(got, want):
    return len(got) == len(want) and all(g is not None and abs(g - w) <= 1e-4 * max(1.0, abs(w)) for g, w in zip(got, want))


def train_and_compare(bin_dir, name, center, weights, data, held, failures, exports=(), tokens="pairs.tok"):
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "reward", "--batch", str(SCHEDULE.batch), "--seq",
             str(SCHEDULE.seq), "-o", f"{name}.plan"] + (["--center-rewards-coefficient", str(center)] if center else []))
    ref.run([f"{bin_dir}/mtrun", f"{name}.plan", "--data", tokens, "--log", f"{name}.jsonl", "--val-data",
             "held.tok", "--val-every", str(SCHEDULE.steps)] + SCHEDULE.mtrun_flags() + list(exports))
    score = ref.read_safetensors(f"{name}.safetensors")["score.weight"]
    lines = [json.loads(line) for line in open(f"{name}.jsonl")]
    log, val = [line for line in lines if "val_loss" not in line], [line for line in lines if "val_loss" in line]
    torch_losses, logged, validation = torch_reward(weights, torch.tensor(score), data, held, center,
                                                    ref.read_margins(tokens))
    worst = ref.compare_losses([line["loss"] for line in log], torch_losses, twins.LOSS_TOL, failures)
    keys = ("accuracy", "reward_margin", "reward_chosen", "reward_rejected")
    for step, (line, want) in enumerate(zip(log, logged)):
        got = tuple(line.get(k) for k in keys)
        if got[0] != want[0] or not close(got[1:], want[1:]):
            failures.append(f"{name} step {step + 1}: (accuracy, margin, rewards) {got}, the model's {want}")
    got_val = tuple(val[0].get("val_" + k) for k in ("loss",) + keys) if val else ()
    if not close(got_val, validation):
        failures.append(f"{name} held out: {val}, the model's {validation}")
    print(f"{name}: {SCHEDULE.steps} steps within {worst:.1e} of TRL's reward loss; accuracy "
          f"{[line['accuracy'] for line in log]}")
    return log, val


def lora_adapter(bin_dir, failures):
    """A reward model's LoRA adapter as PEFT's sequence classifiers keep one (task_type SEQ_CLS,
    the score head in modules_to_save): --export-peft writes it (the head frozen too), mtc
    --objective reward --lora-from reads it back to the bit, scoring the held-out pairs alike, with
    PEFT's own modules_to_save (["classifier", "score"]) too, and on a ...ForSequenceClassification
    folder (rm-hf) its head from the adapter; an adapter of the other task, or of none, is refused
    either way."""
    shape = ["--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq)]
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "reward", *shape, "-o", "rl.plan", "--lora", "4",
             "--lora-targets", r"(q|v)_proj"])
    shutil.rmtree("rl-peft", ignore_errors=True)
    ref.run([f"{bin_dir}/mtrun", "rl.plan", "--data", "pairs.tok", "--steps", "3", "--lr", "1e-2", "--export",
             "rl.safetensors", "--export-peft", "rl-peft"])
    with open("rl-peft/adapter_config.json") as f:
        config = json.load(f)
    saved = folders.read_hf_safetensors("rl-peft/adapter_model.safetensors")
    trained = ref.read_safetensors("rl.safetensors")
    if config.get("task_type") != "SEQ_CLS" or "score" not in (config.get("modules_to_save") or []) or \
            not torch.equal(saved.get("base_model.model.score.weight", torch.zeros(0)), trained["score.weight"]):
        failures.append(f"--export-peft of a reward model: task_type {config.get('task_type')}, modules_to_save "
                        f"{config.get('modules_to_save')}, the score head saved as trained: "
                        f"{'base_model.model.score.weight' in saved}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "reward", *shape, "-o", "rl-from.plan", "--lora-from", "rl-peft"])
    start = ref.read_safetensors("rl-from.safetensors")
    if set(start) != set(trained) or any(not torch.equal(start[k], trained[k]) for k in trained):
        failures.append("--lora-from a reward model's adapter: the initial weights are not the trained ones")
    losses = []
    for plan, weights in (("rl.plan", ["--weights", "rl.safetensors"]), ("rl-from.plan", [])):
        ref.run([f"{bin_dir}/mtrun", plan, "--data", "held.tok", "--eval-only", "--log", plan + ".eval", *weights])
        losses.append([json.loads(line)["val_loss"] for line in open(plan + ".eval") if "val_loss" in line])
    if losses[0] != losses[1] or not losses[0]:
        failures.append(f"--lora-from a reward model's adapter scores the held-out pairs {losses[1]}, the run {losses[0]}")
    def variant(name, **changes):  # rl-peft with its config changed (a key set to None removed)
        os.makedirs(name, exist_ok=True)
        shutil.copy("rl-peft/adapter_model.safetensors", name)
        with open(os.path.join(name, "adapter_config.json"), "w") as f:
            json.dump({k: v for k, v in dict(config, **changes).items() if v is not None}, f)
        return name
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "reward", *shape, "-o", "peft-form.plan", "--lora-from",
             variant("peft-form", modules_to_save=["classifier", "score"])])
    ref.run([f"{bin_dir}/mtc", "rm-hf", "--objective", "reward", *shape, "-o", "on-rm.plan", "--lora-from", "rl-peft"])
    peft_form = ref.read_safetensors("peft-form.safetensors")
    if set(peft_form) != set(start) or any(not torch.equal(peft_form[k], start[k]) for k in start) \
            or not torch.equal(ref.read_safetensors("on-rm.safetensors")["score.weight"], trained["score.weight"]):
        failures.append("--lora-from a reward model's adapter: PEFT's modules_to_save form not read alike, or a "
                        "sequence classifier folder's head not the adapter's")
    # A frozen head is saved too: PEFT's sequence classifier always wraps it.
    shutil.rmtree("frozen-peft", ignore_errors=True)
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "reward", *shape, "-o", "rlf.plan", "--lora", "4", "--frozen",
             "^score"])
    ref.run([f"{bin_dir}/mtrun", "rlf.plan", "--data", "pairs.tok", "--steps", "1", "--export", "rlf.safetensors",
             "--export-peft", "frozen-peft"])
    if not torch.equal(folders.read_hf_safetensors("frozen-peft/adapter_model.safetensors")["base_model.model.score.weight"],
                       ref.read_safetensors("rlf.safetensors")["score.weight"]):
        failures.append("--export-peft of a reward model with its head frozen: the head not saved")
    for model, adapter, want in ((["qwen"], "rl-peft", "task_type SEQ_CLS"),
                                 (["qwen", "--objective", "reward"], variant("causal-peft", task_type="CAUSAL_LM"),
                                  "task_type CAUSAL_LM or none"),
                                 (["qwen", "--objective", "reward"], variant("no-task", task_type=None),
                                  "task_type CAUSAL_LM or none"),
                                 (["qwen", "--forward-only"], "rl-peft", "has no forward-only plan")):
        r = subprocess.run([f"{bin_dir}/mtc", *model, *shape, "-o", "x.plan", "--lora-from", adapter],
                           capture_output=True, text=True)
        if r.returncode == 0 or want not in r.stderr or os.path.exists("x.plan"):
            failures.append(f"--lora-from {adapter} on {' '.join(model)}: exit {r.returncode}, {r.stderr.strip()[:200]}")
    print(f"a reward model's LoRA adapter: task_type SEQ_CLS, the score head in modules_to_save; read back to the "
          f"bit, the held-out pairs scored {losses[1]}")


def classifier_rewards(p, config, examples):
    """Rewards as transformers' ...ForSequenceClassification reads them: the examples right-padded
    with pad_token_id, each row's score at its last token that is not padding."""
    pad, width = config["pad_token_id"], max(len(e) for e in examples)
    x = torch.tensor([list(e) + [pad] * (width - len(e)) for e in examples])
    scores_ = twins.hf_logits(p, dict(config, tie_word_embeddings=False), x, score_head=True)
    last = ((x != pad).long() * torch.arange(width)).argmax(-1)
    return scores_[torch.arange(len(examples)), last, 0]


def round_trip(bin_dir, export, folder, validation, held, end, failures):
    """The --export-hf folder of run r: a Qwen2ForSequenceClassification of one label whose
    pad_token_id is mttok's end-of-text token; transformers' rule on its weights gives the run's
    last validation; mtc compiles it back (--objective reward) to the run's weights bit for bit."""
    config = json.load(open(f"{folder}/config.json"))
    want = {"architectures": ["Qwen2ForSequenceClassification"], "model_type": "qwen2", "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0}, "pad_token_id": end}
    if any(config.get(k) != v for k, v in want.items()):
        failures.append(f"{folder}/config.json: {({k: config.get(k) for k in want})}, not {want}")
    p = folders.read_hf_safetensors(f"{folder}/model.safetensors")
    ours = ref.read_safetensors(export)
    if "lm_head.weight" in p or not torch.equal(p.get("score.weight", torch.zeros(0)), ours["score.weight"]) or \
            len(p) != len(ours):
        failures.append(f"{folder}: tensors {sorted(p)[:4]}... ({len(p)}), not the run's {len(ours)} with its score head")
    p["lm_head.weight"] = p.pop("score.weight", torch.zeros(1, config["hidden_size"]))
    tokens, _, starts = held
    examples = [tokens[s:(starts[e + 1] if e + 1 < len(starts) else len(tokens))] for e, s in enumerate(starts)]
    with torch.no_grad():
        rewards = classifier_rewards(p, config, examples)
    got = (reward_loss(rewards, 0.0).item(),) + scores(rewards)
    logged = tuple(validation[0].get("val_" + k) for k in ("loss", "accuracy", "reward_margin", "reward_chosen",
                                                             "reward_rejected"))
    if not close(got, logged):
        failures.append(f"{folder} read by transformers' rule: {got}; the run's validation {logged}")
    ref.run([f"{bin_dir}/mtc", folder, "--objective", "reward", "--batch", str(SCHEDULE.batch), "--seq",
             str(SCHEDULE.seq), "-o", "back.plan"])
    back = ref.read_safetensors("back.safetensors")
    if sorted(back) != sorted(ours) or any(not torch.equal(back[k], ours[k]) for k in ours):
        failures.append(f"{folder} compiled back: its weights are not the run's ({sorted(set(back) ^ set(ours))})")
    # mtrun --eval-only on the held-out file: the run's last validation, bit for bit (step 0: the
    # weights are the folder's, no step taken).
    ref.run([f"{bin_dir}/mtrun", "back.plan", "--data", "held.tok", "--eval-only", "--log", "back-eval.jsonl",
             "--scores", "pair-scores.jsonl"])
    evaluated = [json.loads(line) for line in open("back-eval.jsonl")]
    if evaluated != [dict(validation[0], step=0)]:
        failures.append(f"{folder} compiled back, --eval-only on the held-out pairs: {evaluated}; the run's last "
                        f"validation {validation}")
    scored_pairs(bin_dir, rewards, validation[0]["val_loss"], failures)
    # --val-data alone (no --data) scores that file as --data would.
    ref.run([f"{bin_dir}/mtrun", "back.plan", "--val-data", "held.tok", "--eval-only", "--log", "val-only.jsonl"])
    if [json.loads(line) for line in open("val-only.jsonl")] != evaluated:
        failures.append(f"--eval-only --val-data alone: {open('val-only.jsonl').read()}; with --data {evaluated}")
    lm = subprocess.run([f"{bin_dir}/mtc", folder, "-o", "lm-from-rm.plan"], capture_output=True, text=True)
    if lm.returncode == 0 or "is a reward model (Qwen2ForSequenceClassification" not in lm.stderr or \
            "compile it with --objective reward" not in lm.stderr:
        failures.append(f"a reward model's folder compiled without --objective reward: exit {lm.returncode}: "
                        f"{lm.stderr}")
    print(f"{folder}: Qwen2ForSequenceClassification, pad_token_id {end}; transformers' rule gives the held-out "
          f"score {got[0]:.6f} (the run's {logged[0]:.6f}); compiled back bit for bit, and scored alike by --eval-only")


def scored_pairs(bin_dir, rewards, val_loss, failures):
    """--eval-only --scores of the reward model compiled back: each held-out pair's rewards those
    transformers' rule reads from the exported folder (`rewards`, the examples' in order), whether
    the chosen reply wins, the losses' mean the logged loss. The same replies as texts of their own
    (prompt-completion and messages records, mttok --chat: the tokens of the pairs' examples) are
    each scored alone with the rewards of the pairs' lines, bit for bit (each row the same)."""
    lines = [json.loads(line) for line in open("pair-scores.jsonl")]
    want = [(p, bool(rewards[2 * p] > rewards[2 * p + 1]), rewards[2 * p].item(), rewards[2 * p + 1].item())
            for p in range(len(rewards) // 2)]
    got = [(s["pair"], s["chosen_wins"], s["reward_chosen"], s["reward_rejected"]) for s in lines]
    if len(got) != len(want) or any(g[:2] != w[:2] or not close(g[2:], w[2:]) for g, w in zip(got, want)) or \
            not close((sum(s["loss"] for s in lines) / len(lines),), (val_loss,)):
        failures.append(f"--eval-only --scores of the held-out pairs: {lines}; transformers' rule {want}, loss "
                        f"{val_loss}")
        return
    with open("texts.jsonl", "w") as f:  # each pair's chosen, then its rejected reply, as a text alone
        for line in open("held.jsonl"):
            record = json.loads(line)
            for side in ("chosen", "rejected"):
                text = {"prompt": record["prompt"], "completion": record[side]} if "prompt" in record else \
                    {"messages": record[side]}
                f.write(json.dumps(text) + "\n")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--chat", "texts.jsonl", "-o", "texts.tok"])
    if ref.read_token_file("texts.tok")[0].tolist() != ref.read_token_file("held.tok")[0].tolist():
        failures.append("mttok --chat of the pairs' replies as prompt-completion records: not the pairs' tokens")
    ref.run([f"{bin_dir}/mtrun", "back.plan", "--data", "texts.tok", "--eval-only", "--scores", "text-scores.jsonl",
             "--log", "texts-eval.jsonl"])
    texts = [json.loads(line) for line in open("text-scores.jsonl")]
    paired = [r for s in lines for r in (s["reward_chosen"], s["reward_rejected"])]
    logged = [json.loads(line) for line in open("texts-eval.jsonl")]
    if texts != [{"example": e, "reward": r} for e, r in enumerate(paired)] or \
            logged[0].get("texts") != len(paired) or not close((logged[0].get("reward_mean"),), (sum(paired) / len(paired),)):
        failures.append(f"--eval-only --scores of the replies as texts: {texts}, log {logged}; the pairs' {paired}")
    for flags, says in ((["--data", "texts.tok"], "to score each text alone, give --eval-only --scores FILE"),
                        (["--data", "held.tok", "--val-data", "texts.tok", "--scores", "x.jsonl"],
                         "holds texts and --data held.tok pairs")):
        refused = subprocess.run([f"{bin_dir}/mtrun", "back.plan", "--eval-only"] + flags, capture_output=True, text=True)
        if refused.returncode != 1 or says not in refused.stderr or os.path.exists("x.jsonl"):
            failures.append(f"a reward model on texts, {flags}: exit {refused.returncode}: {refused.stderr}")
    scored_apart(bin_dir, failures)
    print(f"--scores: {len(lines)} pairs as transformers' rule scores them; their {len(texts)} replies alone alike")


def scored_apart(bin_dir, failures):
    """--scores of --val-fraction's tail: its pairs numbered in the file from the first whole pair
    held out, their rewards those of the same pairs scored with the whole file. Texts scored by two
    ranks (mpirun, 12 texts in 3 batches: the ranks' shares interleave): one process's file."""
    tokens = ref.read_token_file("pairs.tok")[0]
    starts = ref.read_example_starts("pairs.tok")
    begin = len(tokens) - int(0.3 * len(tokens))
    first = next(e for e, s in enumerate(starts) if s >= begin)
    first += first % 2  # whole pairs
    for name, flags in (("all", []), ("tail", ["--val-fraction", "0.3"])):
        ref.run([f"{bin_dir}/mtrun", "back.plan", "--data", "pairs.tok", "--eval-only", "--scores", f"{name}.jsonl"]
                + flags)
    every = [json.loads(line) for line in open("all.jsonl")]
    tail = [json.loads(line) for line in open("tail.jsonl")]
    want = every[first // 2:]
    if not tail or [s["pair"] for s in tail] != [s["pair"] for s in want] or \
            any(not close((t["reward_chosen"], t["reward_rejected"]), (w["reward_chosen"], w["reward_rejected"]))
                for t, w in zip(tail, want)):
        failures.append(f"--val-fraction 0.3 --scores: {tail}; pairs {first // 2}.. of the whole file {want}")
    with open("texts12.jsonl", "w") as f:
        f.write(open("texts.jsonl").read() * 2)
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--chat", "texts12.jsonl", "-o", "texts12.tok"])
    cmd = [f"{bin_dir}/mtrun", "back.plan", "--data", "texts12.tok", "--eval-only", "--scores"]
    ref.run(cmd + ["texts12.jsonl.scores"])
    ranks, why = ref.two_ranks(cmd + ["texts12-np2.jsonl.scores"])
    if ranks is None:
        print(f"reward: the two ranks' --scores not checked: {why}")
    elif open("texts12-np2.jsonl.scores").read() != open("texts12.jsonl.scores").read() or \
            len(open("texts12.jsonl.scores").readlines()) != 12:
        failures.append("--eval-only --scores of 12 texts by mpirun -np 2 differs from one process's")


def with_margins(bin_dir, weights, data, held, failures):
    """Pairs with TRL's "margin" column: mttok --preferences keeps each pair's (a version-6 token
    file), the run's losses follow TRL's loss with the margins; --eval-only --scores on those pairs
    gives each pair's margin and its loss with it. A margin that is not a finite number, and pairs of
    which only some give one, are refused by name."""
    margins = [0.25 * (i % 4) - 0.25 for i in range(9)]
    with open("margins.jsonl", "w") as f:
        for line, margin in zip(open("pairs.jsonl"), margins):
            f.write(json.dumps(dict(json.loads(line), margin=margin)) + "\n")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "margins.jsonl", "-o", "margins.tok"])
    got = ref.read_margins("margins.tok")
    if got is None or list(got) != margins or not np.array_equal(ref.read_token_file("margins.tok")[0], data[0]):
        failures.append(f"mttok --preferences with margins: {got}, not {margins} beside the pairs' tokens")
        return
    log, _ = train_and_compare(bin_dir, "margined", 0.0, weights, data, held, failures, tokens="margins.tok")
    plain = [json.loads(line)["loss"] for line in open("r.jsonl") if "val_loss" not in line]
    if log[0]["loss"] == plain[0]:
        failures.append(f"margins: the first loss {log[0]['loss']} is the run's without them")
    ref.run([f"{bin_dir}/mtrun", "margined.plan", "--data", "margins.tok", "--eval-only", "--scores", "m-scores.jsonl"])
    lines = [json.loads(line) for line in open("m-scores.jsonl")]
    softplus = lambda x: max(x, 0.0) + np.log1p(np.exp(-abs(x)))  # noqa: E731
    if [s.get("margin") for s in lines] != margins or any(
            not close((s["loss"],), (softplus(-(s["reward_chosen"] - s["reward_rejected"] - s["margin"])),))
            for s in lines):
        failures.append(f"--scores of pairs with margins: {lines}; margins {margins}")
    for name, record, says in (("nan.jsonl", '{"prompt": "Q", "chosen": "A", "rejected": "B", "margin": "1"}',
                                'nan.jsonl:1: "margin" is "1", not a finite number'),
                               ("some.jsonl", '{"prompt": "Q", "chosen": "A", "rejected": "B", "margin": 1}\n'
                                '{"prompt": "R", "chosen": "A", "rejected": "B"}',
                                "1 of the pairs give a \"margin\" (some.jsonl:1 the first) and 1 do not")):
        with open(name, "w") as f:
            f.write(record + "\n")
        bad = subprocess.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", name, "-o", "bad.tok"],
                             capture_output=True, text=True)
        if bad.returncode != 1 or says not in bad.stderr or os.path.exists("bad.tok"):
            failures.append(f"mttok --preferences {name}: exit {bad.returncode}: {bad.stderr}")


def other_pad_token(bin_dir, failures):
    """A tokenizer whose pad token is not its end-of-text token (its tokenizer_config.json names
    <|im_end|>): the export's pad_token_id is the tokenizer's pad token, so that its padding and
    the config agree, and mtrun says to score texts without the end-of-text token."""
    path = "qwen/tokenizer_config.json"
    original = open(path).read()
    with open(path, "w") as f:
        json.dump(dict(json.loads(original), pad_token="<|im_end|>"), f)
    run = subprocess.run([f"{bin_dir}/mtrun", "r.plan", "--data", "pairs.tok", "--steps", "1", "--export-hf", "rm-pad"],
                         capture_output=True, text=True)
    with open(path, "w") as f:
        f.write(original)
    config = json.load(open("rm-pad/config.json")) if run.returncode == 0 else {}
    if config.get("pad_token_id") != 151645 or "the tokenizer's pad token: transformers reads each sequence's reward " \
            "at its last token before the padding" not in run.stdout or "score texts without that token" not in run.stdout:
        failures.append(f"a tokenizer padding with <|im_end|>: exit {run.returncode}, pad_token_id "
                        f"{config.get('pad_token_id')}: {run.stdout[-500:]}{run.stderr}")


def from_a_fine_tuned_model(bin_dir, failures):
    """A built-in GPT-2's reward model (its vocabulary its token table's, not its position table's)
    trains from the --export of a next-token run, its score head new (seeded, and said so); its
    --export-hf is a GPT2ForSequenceClassification without pad_token_id (no tokenizer says which
    token ends the examples: mtrun says so), and compiles back to the run's weights."""
    data = ref.make_corpus(bin_dir, ".")
    ref.write_example_corpus(data, "byte-pairs.tok", pairs=True)
    ref.run([f"{bin_dir}/mtc", "gpt2-tiny", "--batch", "4", "--seq", "32", "-o", "lm.plan"])
    ref.run([f"{bin_dir}/mtrun", "lm.plan", "--data", data, "--steps", "2", "--export", "sft.safetensors"])
    ref.run([f"{bin_dir}/mtc", "gpt2-tiny", "--objective", "reward", "--batch", "4", "--seq", "32", "-o", "g.plan"])
    run = subprocess.run([f"{bin_dir}/mtrun", "g.plan", "--data", "byte-pairs.tok", "--weights", "sft.safetensors",
                          "--steps", "2", "--log", "g.jsonl", "--export", "g-export.safetensors", "--export-hf", "g-hf"],
                         capture_output=True, text=True)
    if run.returncode != 0 or "sft.safetensors holds no score.weight: a reward model's new score head" not in run.stdout \
            or len(open("g.jsonl").readlines()) != 2 or "no pad_token_id" not in run.stdout:
        failures.append(f"a GPT-2 reward model from a next-token run's export: exit {run.returncode}: "
                        f"{run.stdout[-400:]}{run.stderr}")
        return
    config = json.load(open("g-hf/config.json"))
    if config["architectures"] != ["GPT2ForSequenceClassification"] or "pad_token_id" in config:
        failures.append(f"g-hf/config.json: {config}")
    ref.run([f"{bin_dir}/mtc", "g-hf", "--objective", "reward", "--batch", "4", "--seq", "32", "-o", "g-back.plan"])
    back, ours = ref.read_safetensors("g-back.safetensors"), ref.read_safetensors("g-export.safetensors")
    if sorted(back) != sorted(ours) or any(not torch.equal(back[k], ours[k]) for k in ours):
        failures.append("g-hf compiled back: its weights are not the run's")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    failures = []
    weights = folders.write_chat_folder("qwen", own_template=True)
    preference_data("pairs.jsonl")
    preference_data("held.jsonl", range(20, 23))
    for name in ("pairs", "held"):
        ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", f"{name}.jsonl", "-o", f"{name}.tok"])
    tokens, counted, _ = ref.read_token_file("pairs.tok")
    starts = ref.read_example_starts("pairs.tok")
    held = ref.read_token_file("held.tok")[:2] + (ref.read_example_starts("held.tok"),)
    # The reward's token is the one before each example's end-of-text token (every example whole here).
    ends = [(starts[e + 1] if e + 1 < len(starts) else len(tokens)) - 1 for e in range(len(starts))]
    if any(starts[e] + reward_position(starts, len(tokens), e, SCHEDULE.seq) != ends[e] - 1 or
           tokens[ends[e]] != tokens[ends[0]] for e in range(len(starts))):
        failures.append("a reward's position is not the token before its example's end-of-text token")
    log, validation = train_and_compare(bin_dir, "r", 0.0, weights, (tokens, counted, starts), held, failures,
                                        exports=("--export", "r-export.safetensors", "--export-hf", "rm-hf"))
    round_trip(bin_dir, "r-export.safetensors", "rm-hf", validation, held, int(tokens[ends[0]]), failures)
    other_pad_token(bin_dir, failures)
    if log[-1]["loss"] >= log[0]["loss"]:
        failures.append(f"reward losses {[line['loss'] for line in log]}: not falling")
    train_and_compare(bin_dir, "centered", 0.05, weights, (tokens, counted, starts), held, failures)
    with_margins(bin_dir, weights, (tokens, counted, starts), held, failures)
    # KTO's data on a reward plan: refused, naming the fix.
    with open("feedback.jsonl", "w") as f:
        for i in range(2):
            f.write(json.dumps({"prompt": f"Hi {i}", "completion": "Hello.", "label": bool(i)}) + "\n")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--unpaired", "feedback.jsonl", "-o", "kto.tok"])
    kto = subprocess.run([f"{bin_dir}/mtrun", "r.plan", "--data", "kto.tok", "--steps", "1"], capture_output=True,
                         text=True)
    if kto.returncode != 1 or "tokenise preference pairs with mttok --preferences" not in kto.stderr:
        failures.append(f"a reward plan on KTO's data: exit {kto.returncode}: {kto.stderr}")
    from_a_fine_tuned_model(bin_dir, failures)
    lora_adapter(bin_dir, failures)
    ref.finish("reward", failures)


if __name__ == "__main__":
    main()
