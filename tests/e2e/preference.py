"""Preference training (DPO) end to end, as a user does it: preference data in every shape TRL's
DPOTrainer reads (a string prompt and replies, message lists, two conversations sharing their
prompt) turned into pairs of examples by `mttok --tokenizer FOLDER --preferences`, a Qwen2 folder
compiled by `mtc FOLDER --objective dpo` and trained by mtrun. The reference log-probabilities are
the starting weights', computed before the first step. The losses must follow a transformers-style
PyTorch model of the same folder trained with TRL's loss on the same pairs within 1e-4 over the
steps (sigmoid; hinge; robust with label smoothing; IPO of mean log-probabilities; SimPO,
reference-free, as TRL's CPOTrainer), and the logged implicit rewards (the share of
pairs the chosen reply wins, the margin) must be the model's, as must the held-out pairs' loss and
rewards. A run resumed from a checkpoint reads the reference back and continues as the straight
run does, and a streamed plan recomputing its activations gives the resident plan's losses bit for
bit; the head and its loss split into vocabulary chunks give the same losses, rewards and held-out
score within float rounding; a Gemma 2 folder's softcapped logits train as its twin's, whole and in
vocabulary chunks; the resident plan's loss-only run stops before the backward; --max-length cuts a pair as TRL
does; --batch auto sizes pairs; two ranks log what --accumulate 2 logs; what does not fit is
refused by name.
usage: /usr/bin/python3 tests/e2e/preference.py BIN_DIR WORK_DIR
"""
import json
import os
import re
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
SCHEDULE = ref.Schedule(steps=5, lr=3e-3, warmup=1, min_lr_ratio=0.1, weight_decay=0.1, clip=1.0, seed=3,
                        batch=4, seq=40, lr_schedule="linear")
SPEC = folders.CHAT_QWEN2
# Gemma 2 (hf_import's, smaller) over the chat folder's vocabulary: its scores capped at 2 and its
# logits at 2, the cap's slope in every log-probability's gradient; one layer, sliding.
CAPPED = dict(folders.MODELS["gemma2-f32"], config=dict(
    folders.MODELS["gemma2-f32"]["config"], hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
    num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16, vocab_size=SPEC["config"]["vocab_size"],
    final_logit_softcapping=2.0))


def preference_data(path, pairs=range(9)):
    """Pairs in the three shapes, replies of uneven lengths."""
    with open(path, "w", encoding="utf-8") as f:
        for i in pairs:
            good, bad = f"{i} + {i} = {2 * i}.", f"It is {2 * i + 1}, I believe, or perhaps not."
            if i % 3 == 0:
                pair = {"prompt": f"Double {i}.", "chosen": good, "rejected": bad}
            elif i % 3 == 1:
                pair = {"prompt": [{"role": "system", "content": "Be exact."}, {"role": "user", "content": f"Double {i}."}],
                        "chosen": [{"role": "assistant", "content": good}], "rejected": bad}
            else:
                prompt = [{"role": "user", "content": f"Double {i}, please."}]
                pair = {"chosen": prompt + [{"role": "assistant", "content": good}],
                        "rejected": prompt + [{"role": "assistant", "content": bad}]}
            f.write(json.dumps(pair) + "\n")


def run_out(cmd):
    """ref.run, its standard output returned (and echoed)."""
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    print(done.stdout + done.stderr, end="")
    return done.stdout


def rows_of(tokens, counted, starts, examples):
    return ref.example_rows(tokens, counted, starts, examples, SCHEDULE.seq)


REFERENCE_CACHE = {}


def reference_logps(weights, average, logps, train, held):
    """The reference model's log-probabilities of the training and held-out examples, computed once
    per weights, kind of score and data (the arrays themselves, kept with the entry): the twins of
    the 14 losses share them. The last few entries are kept (a spread's perturbed weights are
    used once)."""
    key = (id(weights), average, tuple(map(id, train)), tuple(map(id, held)))
    cached = REFERENCE_CACHE.get(key)
    if cached is None or cached[0] is not weights or any(a is not b for a, b in zip(cached[1], train + held)):
        model = {k: v.float() for k, v in weights.items()}
        cached = (weights, train + held, logps(train, model), logps(held, model))
        REFERENCE_CACHE[key] = cached
        while len(REFERENCE_CACHE) > 4:
            REFERENCE_CACHE.pop(next(iter(REFERENCE_CACHE)))
    return cached[2], cached[3]


def torch_dpo(weights, tokens, counted, starts, held, kind="sigmoid", smoothing=0.0, beta=BETA, gamma=0.0,
              rpo_alpha=0.0, reference_weights=None, config=SPEC["config"]):
    """The transformers-style model trained with TRL's loss (`kind`, label smoothing; SimPO's
    `gamma`, without a reference; ORPO's odds-ratio term, without one; plus `rpo_alpha` times the
    chosen rows' cross-entropy, TRL's rpo_alpha and ORPO's NLL term) on mtrun's pairs: the losses,
    each step's (share of pairs won, mean reward margin, the replies' mean log-probabilities; with
    rpo_alpha the NLL; for ORPO the mean log odds ratio), and after the last step the held-out
    pairs' (`held`: tokens, counted, starts) mean loss, share won, margin, ... alike. ORPO's NLL here is over the
    chosen replies' tokens, as the paper defines it and mttok counts them (TRL's ORPOTrainer also
    counts the prompt's). The reference model is `reference_weights` where given, else `weights`;
    the model's config `config` (the chat folder's unless given)."""
    average = kind in ("ipo", "simpo", "orpo")  # TRL averages each reply's log-probabilities for these
    params = {k: v.float().requires_grad_() for k, v in weights.items()}
    logits_of = lambda x: twins.hf_logits(params, config, x)  # noqa: E731

    def logps(data, model=params):  # every example of (tokens, counted, starts)
        x, y = rows_of(*data, range(len(data[2])))
        with torch.no_grad():
            return ref.sequence_logps(twins.hf_logits(model, config, x), y, average=average)

    reference, held_reference = reference_logps(reference_weights or weights, average, logps,
                                                (tokens, counted, starts), held)
    if kind in ("simpo", "orpo"):  # reference-free
        reference, held_reference = torch.zeros_like(reference), torch.zeros_like(held_reference)
    drawn = [[ref.pair_example(starts, step, row, SCHEDULE.seed) for row in range(SCHEDULE.batch)]
             for step in range(SCHEDULE.steps)]
    rewards = []

    def chosen_nll(logits, y):  # TRL's RPO term: the chosen rows' cross-entropy per counted token
        return torch.nn.functional.cross_entropy(logits[0::2].flatten(0, 1).float(), y[0::2].flatten(),
                                                 ignore_index=-100)

    def log_odds(policy):  # ORPO's mean log odds ratio (TRL logs it as log_odds_chosen)
        if kind != "orpo":
            return ()
        return (ref.orpo_log_odds(policy[0::2].detach(), policy[1::2].detach()).mean().item(),)

    def loss_of(logits, y, step):
        policy, ref_logps = ref.sequence_logps(logits, y, average=average), reference[drawn[step]]
        margin = beta * ((policy[0::2] - ref_logps[0::2]) - (policy[1::2] - ref_logps[1::2])).detach()
        rewards.append(((margin > 0).double().mean().item(), margin.mean().item(), policy[0::2].mean().item(),
                        policy[1::2].mean().item()))
        loss = ref.dpo_loss(policy, ref_logps, beta, kind, smoothing, gamma)
        if rpo_alpha:
            nll = chosen_nll(logits, y)
            rewards[-1] += (nll.item(),)
            loss = loss + rpo_alpha * nll
        rewards[-1] += log_odds(policy)
        return loss

    losses = ref.torch_train(params, logits_of, tokens, SCHEDULE, batch_of=lambda s: rows_of(tokens, counted, starts, drawn[s]),
                             loss_of=loss_of)
    policy = logps(held)
    margin = beta * ((policy[0::2] - held_reference[0::2]) - (policy[1::2] - held_reference[1::2]))
    held_loss, held_nll = ref.dpo_loss(policy, held_reference, beta, kind, smoothing, gamma).item(), ()
    if rpo_alpha:
        x, y = rows_of(*held, range(len(held[2])))
        with torch.no_grad():
            held_nll = (chosen_nll(logits_of(x), y).item(),)
        held_loss += rpo_alpha * held_nll[0]
    # (loss, won, margin), and with rpo_alpha the chosen replies' NLL per token; each step's alike.
    validation = ((held_loss, (margin > 0).double().mean().item(), margin.mean().item(), policy[0::2].mean().item(),
                   policy[1::2].mean().item()) + held_nll + log_odds(policy))
    return losses, rewards, validation


def other_reference(bin_dir, tokens, counted, starts, held, weights, failures):
    """mtrun --reference-weights: the reference model another one (the starting weights perturbed,
    compiled from a folder of their own), the policy still the starting weights: TRL's losses,
    rewards and held-out score with that reference (the first loss no longer log 2)."""
    generator = torch.Generator().manual_seed(11)
    other = {k: (v.float() + 0.05 * torch.randn(v.shape, generator=generator)).to(v.dtype) for k, v in weights.items()}
    folders.write_folder("qwen_ref", folders.CHAT_QWEN2, other)
    ref.run([f"{bin_dir}/mtc", "qwen_ref", "--objective", "dpo", "--batch", str(SCHEDULE.batch), "--seq",
             str(SCHEDULE.seq), "-o", "qref.plan"])
    out = run_out([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--reference-weights", "qref.safetensors",
                   "--log", "refw.jsonl", "--val-data", "held.tok", "--val-every", str(SCHEDULE.steps), "--export",
                   "refw.safetensors"] + SCHEDULE.mtrun_flags())
    dump = run_out([f"{bin_dir}/mtdump", "refw.safetensors"])
    if not re.search(r"provenance\.reference_weights +qref\.safetensors \(crc32c [0-9a-f]{8}", dump):
        failures.append(f"--reference-weights: the export's provenance does not name the reference: {dump}")
    torch_losses, rewards, validation = torch_dpo(weights, tokens, counted, starts, held, reference_weights=other)
    lines = [json.loads(line) for line in open("refw.jsonl")]
    log, val = [line for line in lines if "val_loss" not in line], [line for line in lines if "val_loss" in line]
    worst = ref.compare_losses([line["loss"] for line in log], torch_losses, twins.LOSS_TOL, failures)
    got = [(line["pairs_right"], line["reward_margin"]) for line in log]
    got_val = (val[0]["val_loss"], val[0]["val_pairs_right"], val[0]["val_reward_margin"]) if val else None
    if abs(log[0]["loss"] - np.log(2)) < 1e-3 or "under qref.safetensors" not in out or \
            any(not won_alike(i, g, w) or abs(g[1] - w[1]) > 1e-4 * max(1.0, abs(w[1]))
                for i, (g, w) in enumerate(zip(got, rewards))) or \
            not got_val or any(abs(g - w) > 1e-4 * max(1.0, abs(w)) for g, w in zip(got_val, validation)):
        failures.append(f"--reference-weights: first loss {log[0]['loss']}, rewards {got}, the model's {rewards}; "
                        f"held out {got_val}, the model's {validation}")
    print(f"--reference-weights: losses within {worst:.1e} of TRL's with that reference, first {log[0]['loss']:.4f}")
    data_parallel(bin_dir, failures, ["--reference-weights", "qref.safetensors"])  # the host copy swapped and back
    ref.run([f"{bin_dir}/mtc", "gpt2-tiny", "-o", "g.plan"])  # another model's weights
    for plan, weights, why in (("orpo.plan", "qref.safetensors", "has no reference model"),
                               ("m.plan", "qref.safetensors", "trains the next token"),
                               ("d.plan", "g.safetensors", "--reference-weights: weights file g.safetensors has no tensor")):
        refused = subprocess.run([f"{bin_dir}/mtrun", plan, "--data", "pairs.tok", "--reference-weights", weights,
                                  "--steps", "1", "--checkpoint-dir", "refused"], capture_output=True, text=True)
        if refused.returncode != 1 or why not in refused.stderr or os.path.exists("refused"):
            failures.append(f"--reference-weights {weights} with {plan}: exit {refused.returncode}, checkpoint folder "
                            f"made: {os.path.exists('refused')}: {refused.stderr}")


def default_lr(bin_dir, failures):
    """Without --lr a preference plan trains at TRL's DPOConfig's 1e-6, and says so."""
    out = run_out([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--steps", "1", "--lr-schedule", "constant",
                   "--log", "lr.jsonl"])
    lr = json.loads(open("lr.jsonl").readline())["lr"]
    if lr != 1e-6 or "--lr 1e-06: a preference plan's default" not in out:
        failures.append(f"a preference plan without --lr: lr {lr}: {out}")


def refusals(bin_dir, failures):
    """What does not fit is refused by name, nothing written."""
    odd = subprocess.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--batch", "3", "--seq", "40", "-o", "odd.plan"],
                         capture_output=True, text=True)
    if odd.returncode == 0 or "needs an even --batch" not in odd.stderr or os.path.exists("odd.plan"):
        failures.append(f"mtc --objective dpo --batch 3: exit {odd.returncode}: {odd.stderr}")
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--chat", "sft.jsonl", "-o", "sft.tok"])
    chat = subprocess.run([f"{bin_dir}/mtrun", "d.plan", "--data", "sft.tok", "--steps", "1"], capture_output=True, text=True)
    if chat.returncode != 1 or "make it with mttok --preferences" not in chat.stderr:
        failures.append(f"a DPO plan on instruction data: exit {chat.returncode}: {chat.stderr}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--batch", "4", "--seq", "40", "-o", "m.plan"])
    sft = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "pairs.tok", "--rows", "examples", "--steps", "1"],
                         capture_output=True, text=True)
    if sft.returncode != 1 or "train it with a plan of mtc --objective dpo" not in sft.stderr:
        failures.append(f"preference data on a next-token plan: exit {sft.returncode}: {sft.stderr}")
    packed = subprocess.run([f"{bin_dir}/mtrun", "m.plan", "--data", "pairs.tok", "--steps", "1"], capture_output=True,
                            text=True)
    if packed.returncode != 1 or "would learn the rejected replies too" not in packed.stderr:
        failures.append(f"preference data on a next-token plan, rows by default: exit {packed.returncode}: "
                        f"{packed.stderr}")
    with open("apart.jsonl", "w") as f:
        f.write(json.dumps({"chosen": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
                            "rejected": [{"role": "user", "content": "Yo"}, {"role": "assistant", "content": "No."}]}) + "\n")
    apart = subprocess.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "apart.jsonl", "-o", "apart.tok"],
                           capture_output=True, text=True)
    if apart.returncode != 1 or "apart.jsonl:1" not in apart.stderr or "differ before their last reply" not in \
            apart.stderr or os.path.exists("apart.tok"):
        failures.append(f"conversations with two prompts: exit {apart.returncode}: {apart.stderr}")


def scored(bin_dir, val, failures):
    """mtrun --eval-only --resume on the run's last checkpoint logs its last validation, bit for
    bit; its --scores, each held-out pair's line in order, average to what that line logs (the
    loss, the share of pairs won, the rewards and the log-probabilities, each checked against the
    model above), a pair won where its margin is above 0."""
    ref.run([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--val-data", "held.tok", "--resume", "ck",
             "--eval-only", "--log", "d-eval.jsonl", "--scores", "d-scores.jsonl"])
    evaluated = [json.loads(line) for line in open("d-eval.jsonl")]
    lines = [json.loads(line) for line in open("d-scores.jsonl")]
    n = len(lines)
    means = {k: sum(line[k] for line in lines) / max(n, 1) for k in ("loss", "reward_chosen", "reward_rejected",
                                                                     "logps_chosen", "logps_rejected")}
    want = {k: val[-1]["val_" + k] for k in means}
    if evaluated != val[-1:] or [line["pair"] for line in lines] != list(range(val[-1]["val_pairs"])) or \
            any(abs(means[k] - want[k]) > 1e-9 * max(1.0, abs(want[k])) for k in means) or \
            sum(line["chosen_wins"] for line in lines) != round(val[-1]["val_pairs_right"] * n) or \
            any(line["chosen_wins"] != (line["reward_margin"] > 0) for line in lines):
        failures.append(f"--eval-only --resume ck --scores: {evaluated}, {lines}; the run's last validation {val}")


def resumed(bin_dir, log, val, failures):
    """The run resumed from its step-3 checkpoint: the references (training and held-out) read
    back, the losses and the validation the straight run's; a reference file cut short or of other
    data refused."""
    os.remove("ck/step-000000005.ckpt.safetensors")
    held_out = ["--val-data", "held.tok", "--val-every", str(SCHEDULE.steps)]
    out = run_out([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--resume", "ck", "--log", "b.jsonl"]
                  + held_out + SCHEDULE.mtrun_flags())
    lines = [json.loads(line) for line in open("b.jsonl")]
    later = [line["loss"] for line in lines if "val_loss" not in line][-2:]
    if later != [line["loss"] for line in log[3:]] or "read from ck" not in out or \
            [line["val_loss"] for line in lines if "val_loss" in line] != [line["val_loss"] for line in val]:
        failures.append(f"resumed after step 3: {lines[-3:]}, the straight run's {log[3:]}, {val}")
    # A reference file cut short, or of other data, is refused by name before any step.
    with open("ck/reference_logps.bin", "rb") as f:
        saved = f.read()
    for bytes_, says in ((saved[:-4], "is not the reference log-probabilities of examples 0..18 of pairs.tok"),
                         (saved[:8] + bytes([saved[8] ^ 1]) + saved[9:], "other data (its checksum differs)")):
        with open("ck/reference_logps.bin", "wb") as f:
            f.write(bytes_)
        bad = subprocess.run([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--resume", "ck", "--steps", "6"],
                             capture_output=True, text=True)
        if bad.returncode != 1 or says not in bad.stderr or "step     6" in bad.stdout:
            failures.append(f"a reference file {says!r}: exit {bad.returncode}: {bad.stderr[-300:]}")


def loss_alone(failures):
    """The resident plan's loss-only run (the reference pass, a validation) stops before the
    backward: mtdump's count of compute instructions run for the loss alone ends before the first
    gradient kernel."""
    dump = subprocess.run([f"{sys.argv[1]}/mtdump", "d.plan"], capture_output=True, text=True, check=True).stdout
    lines = dump.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("stream 0 'compute'"))
    alone = int(lines[at].split("(the first ")[1].split()[0])
    first_grad = next(int(line.split()[0]) for line in lines[at + 1:] if "_grad(" in line)
    if alone > first_grad:
        failures.append(f"the resident plan's loss alone runs {alone} compute instructions, past the first gradient "
                        f"kernel at {first_grad}")


def split_examples(path):
    """Each example of a token file as (its tokens before the first counted one, its counted
    tokens, its length with the end token)."""
    tokens, counted, _ = ref.read_token_file(path)
    starts = list(ref.read_example_starts(path)) + [len(tokens)]
    out = []
    for a, b in zip(starts, starts[1:]):
        first = int(np.argmax(counted[a:b])) if counted[a:b].any() else b - a
        out.append((list(tokens[a:a + first]), [int(t) for t, c in zip(tokens[a:b], counted[a:b]) if c], b - a))
    return out


def truncated_pairs(bin_dir, failures):
    """--max-length cuts a pair as TRL cuts one: its prompt's beginning, the same tokens from both
    examples; where the prompt is not enough, each reply's end. --max-prompt-length and
    --max-completion-length keep the prompt's end and each reply's beginning, as TRL's
    max_prompt_length and max_completion_length."""
    whole = split_examples("pairs.tok")
    longest = max(length for _, _, length in whole)
    for max_length, within_prompt in ((longest - 2, True), (8, False)):
        ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "pairs.jsonl", "--max-length",
                 str(max_length), "-o", "cut.tok"])
        cut = split_examples("cut.tok")
        for p in range(len(cut) // 2):
            pair, was = cut[2 * p:2 * p + 2], whole[2 * p:2 * p + 2]
            ok = all(length <= max_length for _, _, length in pair) and pair[0][0] == pair[1][0]
            for (prompt, reply, _), (prompt_was, reply_was, _) in zip(pair, was):
                ok &= prompt == prompt_was[len(prompt_was) - len(prompt):] and reply == reply_was[:len(reply)]
                ok &= bool(prompt) and reply == reply_was if within_prompt else not prompt and 0 < len(reply)
            if not ok:
                failures.append(f"--max-length {max_length}, pair {p}: {pair}, uncut {was}")
    # TRL's max_prompt_length and max_completion_length: the prompt's last 4 tokens, each reply's first 3.
    out = run_out([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "pairs.jsonl", "--max-prompt-length", "4",
                   "--max-completion-length", "3", "-o", "cut.tok"])
    cut = split_examples("cut.tok")
    for (prompt, reply, _), (prompt_was, reply_was, _) in zip(cut, whole):
        if prompt != prompt_was[-4:] or reply != reply_was[:3] or len(reply_was) < 4:
            failures.append(f"--max-prompt-length 4 --max-completion-length 3: {prompt}, {reply}; uncut {prompt_was}, "
                            f"{reply_was}")
    if "18 of 18 examples cut to --max-prompt-length 4 tokens, --max-completion-length 3 tokens" not in out:
        failures.append(f"mttok's report of the prompt and completion cuts: {out}")


def batch_auto(bin_dir, failures):
    """--batch auto sizes even batches for DPO: at a budget where the largest batch of the next
    token that fits is odd, DPO's largest is the even one below it."""
    def largest(*flags):
        out = subprocess.run([f"{bin_dir}/mtc", "llama-tiny", "--batch", "auto", "--seq", "32", *flags, "-o", "a.plan"],
                             capture_output=True, text=True, check=True).stdout
        said = re.search(r"the largest that fits --device-mem, (\d+),", out) or \
            re.search(r"batch (\d+): the largest that fits", out)
        return int(said.group(1))
    for budget in ("2500KiB", "2700KiB", "2900KiB", "3100KiB"):
        odd = largest("--device-mem", budget)
        if odd % 2:
            even = largest("--device-mem", budget, "--objective", "dpo")
            if even != odd - 1:
                failures.append(f"--batch auto --device-mem {budget}: DPO's largest batch {even}, the next token's {odd}")
            return
    failures.append("no budget tried gives an odd largest batch: --batch auto's pairs are untested")


def data_parallel(bin_dir, failures, flags=()):
    """mpirun -np 2 (the reference shared between the ranks, each step's rewards over both ranks'
    pairs, the held-out pairs validated) logs what --accumulate 2 in one process logs, bit for bit;
    both with `flags`."""
    common = [f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--val-data", "held.tok", "--val-every", "4",
              "--steps", "4", "--seed", "3", "--lr", "3e-3"] + list(flags)
    lines, why = ref.ranks_against_accumulate(common)
    if not lines or lines[0] != lines[1] or not any("val_pairs_right" in line for line in lines[0]):
        failures.append(f"mpirun -np 2 {flags} ({why}) against --accumulate 2: {lines}")


def split_error(got, want):
    """The worst difference between the logs `got` and `want` of one training whose heads fold each
    token's log-sum-exp in other orders (whole, in vocabulary chunks): the losses and the replies'
    log-probabilities relative to themselves, the implicit rewards relative to beta times the
    log-probabilities they are differences of. A reward is beta times a difference of two sums of
    some 30 log-probabilities near -160: their rounding and the steps after it move the sums by a
    few 1e-6 of themselves, the reward by as much absolutely, which is 1e-3 of a reward near 0.4
    (3.7e-4 at step 3 on an AMD EPYC with OpenBLAS's Zen kernels, the margin 4e-6)."""
    worst = 0.0
    for g, w in zip(got, want):
        for key in ("loss", "logps_chosen", "logps_rejected"):
            worst = max(worst, abs(g[key] - w[key]) / max(1.0, abs(w[key])))
        scales = {"reward_chosen": abs(w["logps_chosen"]), "reward_rejected": abs(w["logps_rejected"]),
                  "reward_margin": abs(w["logps_chosen"]) + abs(w["logps_rejected"])}
        for key, scale in scales.items():
            worst = max(worst, abs(g[key] - w[key]) / max(1.0, BETA * scale))
    return worst


def vocab_split(bin_dir, unsplit, flags, failures):
    """The LM head and its loss over 3 vocabulary chunks (streamed, the tied embedding looked up on
    the host) under `flags`: the losses, rewards and held-out score of the unsplit plan's log
    `unsplit` within float rounding (each token's log-sum-exp is folded chunk by chunk), the
    reference pass included."""
    lines = [json.loads(line) for line in open(unsplit)]
    log, val = [line for line in lines if "val_loss" not in line], [line for line in lines if "val_loss" in line]
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--dpo-beta", str(BETA), "--batch", str(SCHEDULE.batch),
             "--seq", str(SCHEDULE.seq), "--schedule", "streamed", "--vocab-chunks", "3", "-o", "v.plan"] + flags)
    dump = subprocess.run([f"{bin_dir}/mtdump", "v.plan"], capture_output=True, text=True, check=True).stdout
    if dump.count("sequence_logprob_chunk_grad(") != 3 or "sequence_logprob(" in dump:
        failures.append("--vocab-chunks 3: not three chunks' sequence_logprob_chunk_grad in v.plan")
    ref.run([f"{bin_dir}/mtrun", "v.plan", "--data", "pairs.tok", "--weights", "d.safetensors", "--log", "v.jsonl",
             "--val-data", "held.tok", "--val-every", str(SCHEDULE.steps)] + SCHEDULE.mtrun_flags())
    lines = [json.loads(line) for line in open("v.jsonl")]
    split = [line for line in lines if "val_loss" not in line]
    worst = split_error(split, log)
    held = [line["val_loss"] for line in lines if "val_loss" in line]
    if len(split) != len(log) or worst > 1e-5 or \
            [s["pairs_right"] for s in split] != [w["pairs_right"] for w in log] \
            or len(held) != 1 or abs(held[0] - val[0]["val_loss"]) > 2e-5:
        failures.append(f"--vocab-chunks 3 {flags}: {split} held out {held}, unsplit {log} held out {val}")
    print(f"--vocab-chunks 3 {flags}: losses, log-probabilities and rewards within {worst:.1e} (split_error) of the "
          f"unsplit plan's")


def capped_head(bin_dir, tokens, counted, starts, held, failures):
    """DPO through Gemma 2's softcapped logits (mt.softcap before each example's sequence_logprob,
    its gradient through softcap_grad): CAPPED's folder trained by --objective dpo follows the
    transformers-style twin (twins.gemma_logits, the logits capped before the log-softmax) within
    LOSS_TOL, and its head and loss in 3 vocabulary chunks (each chunk capped) give the whole's
    losses and rewards within float rounding."""
    weights = folders.hf_weights(CAPPED["config"], False, CAPPED["dtype"], seed=5)
    folders.write_folder("gemma2", CAPPED, weights)
    logs = {}
    for tag, flags in (("whole", []), ("split", ["--schedule", "streamed", "--vocab-chunks", "3"])):
        plan, log = f"capped-{tag}.plan", f"capped-{tag}.jsonl"
        ref.run([f"{bin_dir}/mtc", "gemma2", "--objective", "dpo", "--dpo-beta", str(BETA), "--batch",
                 str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", plan] + flags)
        dump = subprocess.run([f"{bin_dir}/mtdump", plan], capture_output=True, text=True, check=True).stdout
        caps = (dump.count("softcap("), dump.count("softcap_grad("))
        # Split: each chunk's logits capped in the forward and the two chunks before the last
        # capped again where the backward recomputes them (the last one's kept), each grad once.
        if caps != ((5, 3) if flags else (1, 1)):
            failures.append(f"capped DPO {tag}: {caps} softcap and softcap_grad calls in {plan}")
        ref.run([f"{bin_dir}/mtrun", plan, "--data", "pairs.tok", "--log", log] + SCHEDULE.mtrun_flags())
        logs[tag] = [json.loads(line) for line in open(log)]
    torch_losses, _, _ = torch_dpo(weights, tokens, counted, starts, held, config=CAPPED["config"])
    worst = ref.compare_losses([line["loss"] for line in logs["whole"]], torch_losses, twins.LOSS_TOL, failures)
    split = split_error(logs["split"], logs["whole"])
    if len(logs["split"]) != len(logs["whole"]) or split > 1e-5:
        failures.append(f"capped DPO in 3 vocabulary chunks: {logs['split']}, the whole head's {logs['whole']}")
    print(f"capped DPO (Gemma 2, logits capped at 2): losses within {worst:.1e} of the transformers-style model; "
          f"3 vocabulary chunks within {split:.1e} of the whole head")


def won_alike(step, got, want):
    """Whether the shares of pairs won, got[0] and want[0], agree; at the first step (0-based 0)
    where the policy is the reference they need not: every pair ties there, mtrun's margins are 0
    exactly and it counts no tie as won, while the twin's reference pass rounds otherwise than its
    policy's (margins a few 1e-6 apart), so which side its ties fall on is rounding's."""
    return got[0] == want[0] or (step == 0 and got[0] == 0.0 and got[1] == 0.0 and abs(want[1]) < 1e-4)


def twin_spread(weights, twin_losses, twin):
    """Each step's relative change of the twin's losses when it starts from `weights` perturbed by
    1e-7 relative (`twin(weights)` gives its losses): how far rounding alone moves that trajectory.
    At lr 3e-3 a loss that grows without bound (sppo_hard's squares, nca_pair, apo_zero) overshoots,
    and AdamW's first step, of sign(g) size for every gradient entry, turns entries at rounding
    level into full steps: there the twin moves 16 % at step 2 from such a perturbation (sppo_hard,
    measured), and which machine's BLAS rounds how decides the trajectory past step 1."""
    g = torch.Generator().manual_seed(1)
    perturbed = {k: v * (1 + 1e-7 * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v
                 for k, v in weights.items()}
    return [abs(a - b) / abs(b) for a, b in zip(twin(perturbed), twin_losses)]


CHAOTIC = 0.02  # a twin's relative spread past which a step's loss is not compared (compare_with_spread)


def compare_with_spread(mt_losses, twin_losses, weights, twin, failures):
    """The losses within twins.LOSS_TOL of the twin's; where a step is not, within ten times the twin's
    own spread there (twin_spread), named in the line printed: ten, since mtrun and the twin part
    by fresh rounding in every operation of every step, where the spread's perturbation is one, at
    the start (twice fell short at 2 of 70 steps on an AMD EPYC: APO-zero's step 2, 3.2e-4 against
    a spread of 9.9e-5). A step the twin's spread moves by more than CHAOTIC is rounding's
    trajectory, not the loss's: not compared (named too; SPPO-hard's step 2 was 0.23 from the
    twin on an AMD EPYC with OpenBLAS's Zen kernels, where the twin's own spread is 0.16). A wrong loss shows at
    step 1, where the spread, and so the bound, is the fixed one; the losses whose first step is
    a constant (SPPO's, NCA's, APO-zero's, with the policy at the reference) have their gradients
    checked against finite differences by PreferenceKernels.*, not here. Returns the worst
    difference and a note of the steps whose bound was raised."""
    fixed = []
    worst = ref.compare_losses(mt_losses, twin_losses, twins.LOSS_TOL, fixed)
    if not fixed:
        return worst, ""
    spread = twin_spread(weights, twin_losses, twin)
    raised = []
    for i, (a, b) in enumerate(zip(mt_losses, twin_losses)):
        err = abs(a - b) / abs(b)
        if spread[i] > CHAOTIC:
            raised.append(f"step {i + 1} {err:.1e}, not compared: the twin's own spread is {spread[i]:.1e}")
            continue
        bound = max(twins.LOSS_TOL, 10 * spread[i])
        if bound > twins.LOSS_TOL:
            raised.append(f"step {i + 1} {err:.1e} within {bound:.1e}")
        if not err <= bound:
            failures.append(f"step {i + 1} loss: mtrun {a:.6f} vs torch {b:.6f} (relative {err:.2e}, over ten "
                            f"times the twin's own spread {spread[i]:.1e})")
    if len(mt_losses) != len(twin_losses):
        failures.append(f"mtrun logged {len(mt_losses)} steps, expected {len(twin_losses)}")
    return worst, f" (bounds raised to ten times the twin's spread from weights 1e-7 apart: {', '.join(raised) or 'none'})"


def other_losses(bin_dir, tokens, counted, starts, held, weights, failures):
    """--dpo-loss hinge (a beta small enough that every margin stays inside the hinge), robust
    with --dpo-label-smoothing 0.2, ipo (of each reply's mean log-probability per token), simpo
    (reference-free, with --simpo-gamma and label smoothing), sigmoid with --rpo-alpha (the
    chosen replies' NLL added), orpo (reference-free, its NLL term at weight 1 unless told), and
    exo_pair (no smoothing: TRL's 1e-3), sppo_hard, nca_pair, apo_zero, apo_down, discopop
    (--discopop-tau), aot (smoothed) and aot_pair (sorted over each step's pairs): the losses TRL's loss_type gives, and for SimPO, RPO and ORPO the rewards,
    the NLL, ORPO's log odds ratio and the held-out score too."""
    for kind, smoothing, beta, gamma, rpo in (("hinge", 0.0, 0.05, None, 0.0), ("robust", 0.2, BETA, None, 0.0),
                                              ("ipo", 0.0, BETA, None, 0.0), ("simpo", 0.1, 2.0, 0.8, 0.0),
                                              ("sigmoid", 0.0, BETA, None, 0.7), ("orpo", 0.0, 0.5, None, None),
                                              ("exo_pair", 0.0, BETA, None, 0.0), ("sppo_hard", 0.0, BETA, None, 0.0),
                                              ("nca_pair", 0.0, BETA, None, 0.0), ("apo_zero", 0.0, BETA, None, 0.0),
                                              ("apo_down", 0.0, BETA, None, 0.0), ("discopop", 0.0, BETA, 0.5, 0.0),
                                              ("aot", 0.1, BETA, None, 0.0), ("aot_pair", 0.0, BETA, None, 0.0)):
        name = kind if not rpo else "rpo"
        ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--dpo-beta", str(beta), "--dpo-loss", kind,
                 "--batch", str(SCHEDULE.batch), "--seq", str(SCHEDULE.seq), "-o", f"{name}.plan"]
                + (["--dpo-label-smoothing", str(smoothing)] if smoothing else [])
                + ([{"simpo": "--simpo-gamma", "discopop": "--discopop-tau"}[kind], str(gamma)] if gamma is not None
                   else [])
                + (["--rpo-alpha", str(rpo)] if rpo else []))
        if rpo is None:  # ORPO's own NLL term, at weight 1 without --rpo-alpha
            rpo = 1.0
        out = run_out([f"{bin_dir}/mtrun", f"{name}.plan", "--data", "pairs.tok", "--log", f"{name}.jsonl",
                       "--val-data", "held.tok", "--val-every", str(SCHEDULE.steps)] + SCHEDULE.mtrun_flags())
        torch_losses, rewards, validation = torch_dpo(weights, tokens, counted, starts, held, kind, smoothing, beta,
                                                      gamma or 0.0, rpo)
        lines = [json.loads(line) for line in open(f"{name}.jsonl")]
        log, val = [line for line in lines if "val_loss" not in line], [line for line in lines if "val_loss" in line]
        worst, raised = compare_with_spread(
            [line["loss"] for line in log], torch_losses, weights,
            lambda w: torch_dpo(w, tokens, counted, starts, held, kind, smoothing, beta, gamma or 0.0, rpo)[0], failures)
        print(f"--dpo-loss {kind}, label smoothing {smoothing}, --rpo-alpha {rpo}: losses within {worst:.1e} of "
              f"TRL's{raised}")
        if kind not in ("simpo", "orpo") and not rpo:
            continue
        nll = ("nll",) if rpo else ()  # the chosen replies' NLL per token, logged with --rpo-alpha (and ORPO's)
        nll += ("log_odds",) if kind == "orpo" else ()
        logps = ("logps_chosen", "logps_rejected")  # the policy's, TRL's logps/chosen and logps/rejected
        got = [tuple(line.get(k) for k in ("pairs_right", "reward_margin") + logps + nll) for line in log]
        got_val = (tuple(val[0].get("val_" + k) for k in ("loss", "pairs_right", "reward_margin") + logps + nll)
                   if val else None)
        if ("reference: none" in out) != (kind in ("simpo", "orpo")) or ("nll" in log[0]) != bool(rpo) or \
                any(not won_alike(i, g, w) or len(g) != len(w) or
                    any(abs(a - b) > 1e-4 * max(1.0, abs(b)) for a, b in zip(g[1:], w[1:]))
                    for i, (g, w) in enumerate(zip(got, rewards))) or \
                not got_val or len(got_val) != len(validation) or \
                any(abs(g - w) > 1e-4 * max(1.0, abs(w)) for g, w in zip(got_val, validation)):
            failures.append(f"{name}: rewards {got}, the model's {rewards}; held out {got_val}, the model's "
                            f"{validation}; reference pass: {'reference: none' not in out}; nll logged: "
                            f"{'nll' in log[0]}")


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    ref.fresh_work_dir(work)
    failures = []
    weights = folders.write_chat_folder("qwen", own_template=True)
    preference_data("pairs.jsonl")
    preference_data("held.jsonl", range(20, 23))
    ref.run([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "held.jsonl", "-o", "held.tok"])
    held = ref.read_token_file("held.tok")[:2] + (ref.read_example_starts("held.tok"),)
    out = run_out([f"{bin_dir}/mttok", "--tokenizer", "qwen", "--preferences", "pairs.jsonl", "-o", "pairs.tok"])
    tokens, counted, _ = ref.read_token_file("pairs.tok")
    starts = ref.read_example_starts("pairs.tok")
    with open("pairs.tok", "rb") as f:
        version = int.from_bytes(f.read(12)[8:12], "little")
    if version != 4 or len(starts) != 18 or "9 pairs" not in out:
        failures.append(f"mttok --preferences: version {version}, {len(starts)} examples: {out}")
    # Each example counts its reply alone: the chosen and rejected examples of a pair share their prompt.
    for p in range(9):
        c, r = (ref.example_row(tokens, counted, starts, 2 * p + k, 64)[1] for k in (0, 1))
        first_c, first_r = int(np.argmax(c != -100)), int(np.argmax(r != -100))
        if first_c != first_r or first_c == 0:
            failures.append(f"pair {p}: replies counted from tokens {first_c} and {first_r}")
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--dpo-beta", str(BETA), "--batch", str(SCHEDULE.batch),
             "--seq", str(SCHEDULE.seq), "-o", "d.plan"])
    ref.run([f"{bin_dir}/mtrun", "d.plan", "--data", "pairs.tok", "--log", "d.jsonl", "--checkpoint-dir", "ck",
             "--checkpoint-every", "3", "--val-data", "held.tok", "--val-every", str(SCHEDULE.steps)]
            + SCHEDULE.mtrun_flags())
    log = [json.loads(line) for line in open("d.jsonl")]
    val = [line for line in log if "val_loss" in line]
    log = [line for line in log if "val_loss" not in line]
    torch_losses, rewards, validation = torch_dpo(weights, tokens, counted, starts, held)
    got_val = (val[0]["val_loss"], val[0]["val_pairs_right"], val[0]["val_reward_margin"]) if val else None
    if not got_val or val[0]["val_pairs"] != 3 or any(abs(g - w) > 1e-4 * max(1.0, abs(w))
                                                     for g, w in zip(got_val, validation)):
        failures.append(f"held-out pairs: (loss, won, margin) {got_val}, the model's {validation}")
    worst = ref.compare_losses([line["loss"] for line in log], torch_losses, twins.LOSS_TOL, failures)
    got = [(line["pairs_right"], line["reward_margin"], line["logps_chosen"], line["logps_rejected"]) for line in log]
    if any(not won_alike(i, g, w) or any(abs(a - b) > 1e-4 * max(1.0, abs(b)) for a, b in zip(g[1:], w[1:]))
           for i, (g, w) in enumerate(zip(got, rewards))):
        failures.append(f"implicit rewards (pairs won, margin, the replies' log-probabilities) {got}, the model's "
                        f"{rewards}")
    if abs(log[0]["loss"] - np.log(2)) > 1e-6 or log[-1]["loss"] >= log[0]["loss"]:
        failures.append(f"DPO losses {[line['loss'] for line in log]}: not log 2 at the reference, or not falling")
    print(f"{SCHEDULE.steps} DPO steps: losses within {worst:.1e} of the transformers-style model, rewards {got}")
    other_losses(bin_dir, tokens, counted, starts, held, weights, failures)
    scored(bin_dir, val, failures)
    resumed(bin_dir, log, val, failures)
    loss_alone(failures)
    truncated_pairs(bin_dir, failures)
    batch_auto(bin_dir, failures)
    data_parallel(bin_dir, failures)
    # Streamed with its activations recomputed: the resident plan's losses, bit for bit.
    ref.run([f"{bin_dir}/mtc", "qwen", "--objective", "dpo", "--dpo-beta", str(BETA), "--batch", str(SCHEDULE.batch),
             "--seq", str(SCHEDULE.seq), "--schedule", "streamed-recompute", "-o", "r.plan"])
    ref.run([f"{bin_dir}/mtrun", "r.plan", "--data", "pairs.tok", "--weights", "d.safetensors", "--log", "r.jsonl"]
            + SCHEDULE.mtrun_flags())
    recomputed = [json.loads(line)["loss"] for line in open("r.jsonl")]
    if recomputed != [line["loss"] for line in log]:
        failures.append(f"streamed-recompute losses {recomputed}, the resident plan's {[line['loss'] for line in log]}")
    vocab_split(bin_dir, "d.jsonl", [], failures)
    vocab_split(bin_dir, "ipo.jsonl", ["--dpo-loss", "ipo"], failures)  # means chunk by chunk
    vocab_split(bin_dir, "rpo.jsonl", ["--rpo-alpha", "0.7"], failures)  # the NLL term in the last chunk's block
    capped_head(bin_dir, tokens, counted, starts, held, failures)
    with open("sft.jsonl", "w") as f:
        f.write(json.dumps({"instruction": "Double 2.", "output": "4."}) + "\n")
    refusals(bin_dir, failures)
    other_reference(bin_dir, tokens, counted, starts, held, weights, failures)
    default_lr(bin_dir, failures)
    ref.finish("preference", failures)


if __name__ == "__main__":
    main()
