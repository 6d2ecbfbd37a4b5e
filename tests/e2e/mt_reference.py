"""PyTorch twins of MegaTrain's built-in models, its batch sampler and its LR schedule.

Used by the end-to-end tests to train the same architecture from the same initial weights
on the same batches, and to compare gradients, losses and weights with mtrun's.
Run with /usr/bin/python3 (Debian's torch 1.13).
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

MASK64 = (1 << 64) - 1


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        out[name] = torch.from_numpy(
            np.frombuffer(data[base + b:base + end], dtype="<f4").reshape(e["shape"]).copy())
    return out


def write_safetensors(path, tensors):
    """F32 tensors as a safetensors file (no metadata: mtrun --weights takes it as given)."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def fresh_work_dir(work):
    """Empties (or makes) the test's WORK folder and enters it."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.chdir(work)


def run(cmd):
    """Runs a command of the test, echoing it; fails the test if it fails."""
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def two_ranks(cmd):
    """The command `cmd` run by `mpirun -np 2` on this machine: (its CompletedProcess, "") where it
    ran and passed, else (None, why)."""
    if not shutil.which("mpirun"):
        return None, "no mpirun (bash tools/setup.sh installs openmpi-bin)"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    ranks = subprocess.run(["mpirun", "-np", "2", "--bind-to", "none"] + cmd, capture_output=True, text=True, env=env)
    if ranks.returncode != 0:
        return None, f"mpirun -np 2 exit {ranks.returncode}: {ranks.stderr[-300:]}"
    return ranks, ""


def ranks_against_accumulate(common):
    """The mtrun command `common` (without --log) run by `mpirun -np 2` and in one process with
    --accumulate 2: (the two logs' lines without their timings, "") where both ran, else (None, why)."""
    ranks, why = two_ranks(common + ["--log", "mp.jsonl"])
    if ranks is None:
        return None, why
    run(common + ["--accumulate", "2", "--log", "acc.jsonl"])
    timing = {"tokens_per_s", "step_ms"}
    return [[{k: v for k, v in json.loads(line).items() if k not in timing} for line in open(f)]
            for f in ("mp.jsonl", "acc.jsonl")], ""


def example_rows(tokens, counted, starts, examples, seq):
    """A batch of `examples` (indices into `starts`), one per row from its start as mtrun --rows
    examples and pairs cut them: (tokens, targets) as torch tensors."""
    rows = [example_row(tokens, counted, starts, e, seq) for e in examples]
    return torch.tensor(np.stack([x for x, _ in rows])), torch.tensor(np.stack([y for _, y in rows]))


def make_corpus(bin_dir, work):
    """Deterministic text with structure worth learning, as byte tokens: WORK/data.tok (returned)."""
    text, data = os.path.join(work, "data.txt"), os.path.join(work, "data.tok")
    with open(text, "w") as f:
        for i in range(3000):
            f.write(f"line {i % 97}: the quick brown fox {i * 7 % 13} jumps over {i % 5} dogs.\n")
    run([f"{bin_dir}/mttok", "--bytes", text, "-o", data])
    return data


def read_token_file(path):
    """A token file (runtime/data/token_data.h): its ids, its loss mask (None in version 1), its vocabulary."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"MTTOKENS"
    version, width, count, vocab = struct.unpack("<IIQI", data[8:28])
    dtype = "<u2" if width == 2 else "<u4"
    ids = np.frombuffer(data[32:32 + count * width], dtype=dtype).astype(np.int64)
    counted = np.frombuffer(data[32 + count * width:32 + count * (width + 1)], dtype=np.uint8) if version >= 2 else None
    return ids, counted, vocab


def read_tokens(path):
    return read_token_file(path)[0]


def read_example_starts(path):
    """A version-3 to -6 token file's examples' starts (mttok --chat, --preferences, --unpaired)."""
    with open(path, "rb") as f:
        data = f.read()
    version, width, count = struct.unpack("<IIQ", data[8:24])
    assert version in (3, 4, 5, 6), f"{path} records no examples (version {version})"
    at = 32 + count * (width + 1)
    (n,) = struct.unpack("<Q", data[at:at + 8])
    return np.frombuffer(data[at + 8:at + 8 + 8 * n], dtype="<u8").astype(np.int64)


def read_margins(path):
    """A version-6 token file's pairs' margins (mttok --preferences of records with "margin"), or None."""
    with open(path, "rb") as f:
        data = f.read()
    version, width, count = struct.unpack("<IIQ", data[8:24])
    if version != 6:
        return None
    at = 32 + count * (width + 1)
    (n,) = struct.unpack("<Q", data[at:at + 8])
    return np.frombuffer(data[at + 8 + 8 * n:], dtype="<f4").astype(np.float64)


def _mix(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def _mix_array(x):
    """_mix over a numpy uint64 array (arithmetic modulo 2^64, as in C++)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


class Dropout:
    """mt.dropout's masks (kernels/random/dropout.h) for a PyTorch twin: each nn.Dropout call of
    a forward in training mode is the next site; `begin_run(run)` starts plan run `run` (0-based:
    step - 1 without accumulation). `install(model)` puts it in place of the model's nn.Dropout."""

    def __init__(self, seed):
        self.seed, self.run, self.sites = seed, 0, 0

    def begin_run(self, run):
        self.run, self.sites = run, 0

    def apply(self, x, ratio):
        ratio = np.float32(ratio)
        base = _mix(_mix(_mix(self.seed ^ 0xD50F) ^ self.run) ^ self.sites)
        self.sites += 1
        with np.errstate(over="ignore"):
            draws = _mix_array(np.uint64(base) + np.arange(x.numel(), dtype=np.uint64)) >> np.uint64(32)
        keep = torch.from_numpy(draws >= np.uint64(math.floor(float(ratio) * 2.0 ** 32))).view(x.shape)
        scale = torch.tensor(np.float32(1.0) / (np.float32(1.0) - ratio))
        return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype))

    def install(self, model):
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.forward = lambda x, m=module: self.apply(x, m.p) if m.training else x


def batch(tokens, step, batch_size, seq, seed, counted=None):
    """runtime/data/token_data.cc BatchSampler::fill, step 0-based. With `counted` (a token file's loss
    mask), a target it leaves out is -100 (cross_entropy's ignore_index)."""
    windows = len(tokens) - seq
    xs, ys = [], []
    for b in range(batch_size):
        key = _mix(_mix(seed ^ 0x5EED) ^ ((step << 20) & MASK64) ^ b)
        start = key % windows
        xs.append(tokens[start:start + seq])
        y = np.array(tokens[start + 1:start + seq + 1])
        if counted is not None:
            y = np.where(counted[start + 1:start + seq + 1] != 0, y, -100)
        ys.append(y)
    return torch.tensor(np.stack(xs)), torch.tensor(np.stack(ys))


def example_row(tokens, counted, starts, i, seq):
    """Example i of a version-3 file as mtrun --rows examples puts it in a row: from its start, cut
    after seq + 1 tokens, then padding (token 0, target -100). Returns (tokens, targets)."""
    end = starts[i + 1] if i + 1 < len(starts) else len(tokens)
    example = np.asarray(tokens[starts[i]:end])[:seq + 1]
    mask = np.asarray(counted[starts[i]:end])[:seq + 1]
    n = len(example)
    x, y = np.zeros(seq, dtype=np.int64), np.full(seq, -100, dtype=np.int64)
    x[:n] = example[:seq]
    y[:n - 1] = np.where(mask[1:] != 0, example[1:], -100)
    return x, y


def batch_examples(tokens, counted, starts, step, batch_size, seq, seed):
    """BatchSampler::fill with --rows examples, step 0-based: each row the example (example_row)
    drawn by the packed sampler's key."""
    rows = [example_row(tokens, counted, starts, _mix(_mix(seed ^ 0x5EED) ^ ((step << 20) & MASK64) ^ b) % len(starts),
                        seq) for b in range(batch_size)]
    return torch.tensor(np.stack([x for x, _ in rows])), torch.tensor(np.stack([y for _, y in rows]))


def pair_example(starts, step, row, seed):
    """BatchSampler::exampleOfRow with --rows pairs, step 0-based: rows 2j and 2j + 1 hold the chosen
    and rejected examples of the pair drawn for (step, j)."""
    key = _mix(_mix(seed ^ 0x9A125) ^ ((step << 20) & MASK64) ^ (row // 2))
    return 2 * (key % (len(starts) // 2)) + row % 2


def sequence_logps(logits, y, average=False):
    """mt.sequence_logprob: each row's summed log-probability of its targets (-100 ignored); with
    `average`, over their count (TRL's for the IPO loss: the sum over the completion's size)."""
    logp = torch.log_softmax(logits.float(), -1).gather(-1, y.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    total = (logp * (y != -100)).sum(-1)
    return total / (y != -100).sum(-1).clamp(min=1) if average else total


def orpo_log_odds(c, r):
    """ORPOTrainer's log odds ratio of (chosen, rejected) mean log-probabilities, as TRL writes it."""
    return (c - r) - (torch.log1p(-torch.exp(c)) - torch.log1p(-torch.exp(r)))


def dpo_loss(policy, reference, beta, kind="sigmoid", smoothing=0.0, third=0.0):
    """mt.dpo_loss, as TRL's DPOTrainer computes its loss_type `kind` with label_smoothing (and
    CPOTrainer its "simpo", reference-free: `reference` zeros, with simpo_gamma `third`; and
    ORPOTrainer its odds-ratio term, "orpo", of the rows' means, reference-free; "discopop" with
    discopop_tau `third`): rows 2i chosen, 2i + 1 rejected."""
    if kind == "orpo":  # ORPOTrainer.odds_ratio_loss, as TRL writes it; the trainer subtracts its mean
        return -(beta * F.logsigmoid(orpo_log_odds(policy[0::2], policy[1::2]))).mean()
    c, r = policy[0::2] - reference[0::2], policy[1::2] - reference[1::2]  # the log-ratios
    z = beta * (c - r)
    if kind == "simpo":  # CPOTrainer: logits = (chosen - rejected) - gamma / beta; beta * logits
        z = z - third
    if kind == "exo_pair":  # eqn (16) of the EXO paper, TRL's stand-in 1e-3 for no smoothing
        e = smoothing or 1e-3
        return (z.sigmoid() * (F.logsigmoid(z) - math.log(1 - e))
                + (-z).sigmoid() * (F.logsigmoid(-z) - math.log(e))).mean()
    if kind == "sppo_hard":
        return ((c - 0.5 / beta) ** 2 + (r + 0.5 / beta) ** 2).mean()
    if kind == "nca_pair":
        return (-F.logsigmoid(beta * c) - 0.5 * F.logsigmoid(-beta * c) - 0.5 * F.logsigmoid(-beta * r)).mean()
    if kind == "apo_zero":
        return (1 - torch.sigmoid(beta * c) + torch.sigmoid(beta * r)).mean()
    if kind == "apo_down":
        return (torch.sigmoid(beta * c) + 1 - torch.sigmoid(z)).mean()
    if kind in ("aot", "aot_pair"):  # TRL: each side sorted over the batch, the k-th against the k-th
        x = policy[0::2] - policy[1::2] if kind == "aot" else c
        y = reference[0::2] - reference[1::2] if kind == "aot" else r
        delta = torch.sort(x, dim=0)[0] - torch.sort(y, dim=0)[0]
        return (-F.logsigmoid(beta * delta) * (1 - smoothing) - F.logsigmoid(-beta * delta) * smoothing).mean()
    if kind == "discopop":  # eqn (5) of the DiscoPOP paper
        m = torch.sigmoid(z / third)
        return (-F.logsigmoid(z) * (1 - m) + torch.exp(-z) * m).mean()
    if kind == "hinge":
        return torch.relu(1 - z).mean()
    if kind == "ipo":  # TRL: (logits - 1 / (2 beta))^2, logits the log-ratios' difference (z / beta)
        return ((z / beta - 1 / (2 * beta)) ** 2).mean()
    if kind == "robust":
        return ((-F.logsigmoid(z) * (1 - smoothing) + F.logsigmoid(-z) * smoothing) / (1 - 2 * smoothing)).mean()
    return (-F.logsigmoid(z) * (1 - smoothing) - F.logsigmoid(-z) * smoothing).mean()


def pack_next_fit(order, lengths, seq):
    """runtime/data/example_packing.cc PackedRows: the examples in `order`, next fit into rows of
    `seq` slots (an example takes min(length, seq)). Returns each row's examples."""
    rows, used = [], seq
    for i in order:
        slots = min(lengths[i], seq)
        if used + slots > seq:
            rows.append([])
            used = 0
        rows[-1].append(i)
        used += slots
    return rows


def shuffled_pass(n, seed, p):
    """PackedPasses::pass's Fisher-Yates shuffle of examples 0..n-1 for pass p (the sampler's
    examples from the file's first: its training examples begin there)."""
    order = list(range(n))
    key = _mix(_mix(seed ^ 0x9AC4ED) ^ p)
    for i in range(n, 1, -1):
        j = _mix((key + i) & MASK64) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def packed_example(tokens, counted, starts, i, seq):
    """Example i as a packed row holds it: its tokens (cut to seq + 1, at most seq slots) and
    targets (counted ones; the last -100)."""
    end = starts[i + 1] if i + 1 < len(starts) else len(tokens)
    example = np.asarray(tokens[starts[i]:end])[:seq + 1]
    mask = np.asarray(counted[starts[i]:end])[:seq + 1]
    n = min(len(example), seq)
    y = np.full(n, -100, dtype=np.int64)
    y[:len(example) - 1] = np.where(mask[1:] != 0, example[1:], -100)[:n]
    return torch.tensor(example[:n].astype(np.int64)), torch.tensor(y)


class PackedSampler:
    """mtrun --rows packed-examples' rows, pass after pass (BatchSampler::fill over PackedPasses;
    one rank, no accumulation, training examples from the file's first, every example of the file
    trained on: no --val-fraction): batch(step) gives each row's examples and the targets."""

    def __init__(self, tokens, counted, starts, seed, batch_size, seq):
        self.tokens, self.counted, self.starts, self.seed = tokens, counted, starts, seed
        self.batch_size, self.seq = batch_size, seq
        self.lengths = np.diff(np.append(starts, len(tokens)))
        self.passes = []

    def row(self, g):
        p = 0
        while True:
            if p == len(self.passes):
                self.passes.append(pack_next_fit(shuffled_pass(len(self.starts), self.seed, p), self.lengths, self.seq))
            if g < len(self.passes[p]):
                return self.passes[p][g]
            g -= len(self.passes[p])
            p += 1

    def batch(self, step):
        """(each row's examples as (tokens, targets)), targets (batch, seq) with -100 padding."""
        rows, ys = [], torch.full((self.batch_size, self.seq), -100, dtype=torch.int64)
        for b in range(self.batch_size):
            parts = [packed_example(self.tokens, self.counted, self.starts, i, self.seq)
                     for i in self.row(step * self.batch_size + b)]
            ys[b, :sum(len(x) for x, _ in parts)] = torch.cat([y for _, y in parts])
            rows.append(parts)
        return rows, ys


def packed_logits(rows, seq, vocab, logits_alone):
    """Each example of each row run alone (`logits_alone(tokens)` -> (n, vocab)), its logits in
    its slots; zeros in the padding, whose targets count for nothing."""
    out = torch.zeros(len(rows), seq, vocab)
    for b, parts in enumerate(rows):
        at = 0
        for x, _ in parts:
            out[b, at:at + len(x)] = logits_alone(x)
            at += len(x)
    return out


def write_example_corpus(corpus_path, path, pairs=False, labelled=False, tokens=None):
    """A version-3 token file of `corpus_path`'s tokens cut into examples of 5 to 27 tokens, two
    thirds of each counted: instruction-shaped data for the packed-examples checks; with `pairs`,
    version 4, consecutive examples taken as (chosen, rejected) pairs (for mtc --objective dpo);
    with `labelled` too, version 5, as (example, KL row) pairs, two in three desirable (for mtc
    --objective kto; the KL rows not the examples' prompts with others' completions: the kernels'
    checks need rows, not that meaning); `tokens`: only the corpus's first that many."""
    ids = read_tokens(corpus_path)[:tokens]
    starts = np.cumsum([0] + [5 + (i * 37) % 23 for i in range(len(ids))])
    starts = starts[starts < len(ids)]
    if pairs:
        starts = starts[:len(starts) // 2 * 2]
    labels = [int(p % 3 != 2) for p in range(len(starts) // 2)] if labelled else None
    write_tokens(path, ids, 256, [(i // 7) % 3 != 0 for i in range(len(ids))], starts, pairs, labels)


def write_lognormal_examples(path, count, median, shortest, longest, seed=3):
    """A version-3 token file of `count` instruction-shaped examples of random byte ids, their
    lengths log-normal around `median` (sigma 0.7, as real instruction data: most short) clipped
    to [shortest, longest], the second half of each counted. Returns a line describing them."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(np.log(median), 0.7, count).astype(int), shortest, longest)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    ids = rng.integers(1, 256, int(lengths.sum()))
    counted = np.concatenate([np.arange(n) >= n // 2 for n in lengths]).astype(np.uint8)
    write_tokens(path, ids, 256, counted, starts)
    return (f"{len(lengths)} examples: median {int(np.median(lengths))}, 95% at most "
            f"{int(np.percentile(lengths, 95))}, longest {lengths.max()} tokens")


def write_tokens(path, ids, vocab, counted=None, starts=None, pairs=False, labels=None, margins=None):
    """A token file as runtime/data/token_data.cc writes it: version 2 with a loss mask when `counted`,
    version 3 with the examples' starts too, version 4 with `pairs` (the examples in pairs), version 5
    with `labels` too (one 0/1 per pair), version 6 with `margins` instead (one f32 per pair)."""
    ids = np.asarray(ids)
    width = 2 if vocab <= 65536 else 4
    version = 1 if counted is None else 2 if starts is None else 5 if labels is not None else \
        6 if margins is not None else 4 if pairs else 3
    header = b"MTTOKENS" + struct.pack("<IIQII", version, width, len(ids), vocab, 0)
    body = ids.astype("<u2" if width == 2 else "<u4").tobytes()
    if counted is not None:
        body += np.asarray(counted, dtype=np.uint8).tobytes()
    if starts is not None:
        body += struct.pack("<Q", len(starts)) + np.asarray(starts, dtype="<u8").tobytes()
    if labels is not None:
        body += bytes(labels)
    if margins is not None:
        body += np.asarray(margins, dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(header + body)


def learning_rate(step, steps, lr, warmup, min_lr_ratio, schedule="cosine"):
    """runtime/training/trainer.cc learningRate, step 1-based; `schedule` as mtrun's --lr-schedule."""
    if step <= warmup:
        return lr * step / warmup
    decay = steps - warmup
    if decay <= 1 or schedule == "constant":
        return lr
    progress = (step - warmup - 1) / (decay - 1)
    min_lr = lr * min_lr_ratio
    if schedule == "linear":
        return lr - (lr - min_lr) * progress
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * progress))


class Schedule:
    """One training run's settings, passed to mtrun and used by the PyTorch twin alike."""

    def __init__(self, steps, lr, warmup, min_lr_ratio, weight_decay, clip, seed, batch, seq, lr_schedule="cosine"):
        self.steps, self.lr, self.warmup, self.min_lr_ratio = steps, lr, warmup, min_lr_ratio
        self.weight_decay, self.clip, self.seed, self.batch, self.seq = weight_decay, clip, seed, batch, seq
        self.lr_schedule = lr_schedule

    def mtrun_flags(self):
        return ["--steps", str(self.steps), "--lr", str(self.lr), "--warmup", str(self.warmup),
                "--lr-schedule", self.lr_schedule, "--min-lr-ratio", str(self.min_lr_ratio),
                "--weight-decay", str(self.weight_decay), "--grad-clip", str(self.clip), "--seed", str(self.seed)]


def torch_train(params, logits_of, tokens, schedule, after_backward=None, counted=None, aux_coef=0.0, aux_log=None,
                batch_of=None, loss_of=None, lr_scale=None):
    """mtrun's training loop in PyTorch: the same batches, AdamW (decay on tensors of rank >= 2),
    global-norm clipping and LR schedule. `after_backward(step)` sees the unclipped gradients.
    `counted`: a loss mask (targets it leaves out ignored). Returns the losses. `logits_of` may
    return (logits, aux): a mixture of experts' load-balancing loss, added times `aux_coef` to
    the loss that is differentiated (as Hugging Face does) and appended to `aux_log`. `batch_of(step)`
    (0-based) gives each step's batch instead of the packed sampler's; `loss_of(logits, targets, step)`
    the loss instead of the cross-entropy. `lr_scale(name)`: a parameter's learning rate as a multiple
    of the schedule's (LoRA+'s groups, as PEFT's create_loraplus_optimizer makes them)."""
    s = schedule
    groups = {}  # (weight decay, lr multiple) -> parameters
    for name, p in params.items():
        key = (s.weight_decay if p.dim() >= 2 else 0.0, lr_scale(name) if lr_scale else 1.0)
        groups.setdefault(key, []).append(p)
    opt = torch.optim.AdamW([{"params": ps, "weight_decay": wd, "lr_scale": scale} for (wd, scale), ps in groups.items()],
                            lr=s.lr, betas=(0.9, 0.95), eps=1e-8)
    losses = []
    for step in range(1, s.steps + 1):
        x, y = batch_of(step - 1) if batch_of else batch(tokens, step - 1, s.batch, s.seq, s.seed, counted)
        logits, aux = logits_of(x), None
        if isinstance(logits, tuple):
            logits, aux = logits
        if loss_of:
            loss = loss_of(logits, y, step - 1)
        else:
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), ignore_index=-100)
        opt.zero_grad()
        if aux is not None:
            aux_log.append(aux.item())
            (loss + aux_coef * aux).backward()
        else:
            loss.backward()
        losses.append(loss.item())
        if after_backward:
            after_backward(step)
        torch.nn.utils.clip_grad_norm_(list(params.values()), s.clip)
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, s.steps, s.lr, s.warmup, s.min_lr_ratio, s.lr_schedule) * g["lr_scale"]
        opt.step()
    return losses


def validation_matches(what, log_path, run, want, tol, failures):
    """Whether mtrun's first val_loss in `log_path` (a finished `run`) is `want` within `tol`
    relative; else a failure naming `what`, the run's exit and output."""
    val = []
    if run.returncode == 0 and os.path.exists(log_path):
        with open(log_path) as f:
            val = [json.loads(line)["val_loss"] for line in f if "val_loss" in line]
    if val and abs(val[0] - want) <= tol * want:
        return True
    failures.append(f"{what}: {val} vs the held-out examples' {want} (exit {run.returncode}: {run.stdout[-400:]}"
                    f"{run.stderr})")
    return False


def compare_losses(mt_losses, torch_losses, tol, failures):
    """Appends to `failures` each step whose losses differ by more than `tol` relative (and a
    missing step); returns the worst relative difference."""
    if len(mt_losses) != len(torch_losses):
        failures.append(f"mtrun logged {len(mt_losses)} steps, expected {len(torch_losses)}")
    worst = 0.0
    for i, (a, b) in enumerate(zip(mt_losses, torch_losses)):
        err = abs(a - b) / abs(b)
        worst = max(worst, err)
        if not err <= tol:
            failures.append(f"step {i + 1} loss: mtrun {a:.6f} vs torch {b:.6f} (relative {err:.2e})")
    return worst


def attention(q, k, v, heads, kv_heads, window=0, sinks=None):
    """Causal attention; with a `window`, query i sees keys i - window < j <= i (transformers'
    sliding-window mask); with `sinks` (heads), as gpt-oss's eager_attention_forward: each head's
    sink a column of the scores, the max taken over it too, dropped after the softmax."""
    B, T, _ = q.shape
    D = q.shape[-1] // heads
    q = q.view(B, T, heads, D).transpose(1, 2)
    k = k.view(B, T, kv_heads, D).transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
    v = v.view(B, T, kv_heads, D).transpose(1, 2).repeat_interleave(heads // kv_heads, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(D)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    mask = (j > i) | ((i - j >= window) if window else torch.zeros(T, T, dtype=torch.bool))
    scores = scores.masked_fill(mask, float("-inf"))
    out = softmax_with_sinks(scores, sinks) @ v
    return out.transpose(1, 2).reshape(B, T, heads * D)


def softmax_with_sinks(scores, sinks=None):
    """The softmax of scores (B, H, T, T), with gpt-oss's sinks (H) where given as its
    eager_attention_forward has them: a column of the scores, the max taken over it too, dropped
    after the softmax."""
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    B, H, T, _ = scores.shape
    combined = torch.cat([scores, sinks.reshape(1, -1, 1, 1).expand(B, -1, T, -1)], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    return torch.softmax(combined, dim=-1)[..., :-1]


def rope(x, head_dim, theta):
    B, T, W = x.shape
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.arange(T).float()[:, None] * inv_freq[None, :]
    cos, sin = angles.cos(), angles.sin()
    x = x.view(B, T, W // head_dim, head_dim)
    x1, x2 = x[..., :head_dim // 2], x[..., head_dim // 2:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).view(B, T, W)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def expert_stack(p, name, scale, in_out=False):
    """The stack of experts `name` (E, out, in), or (E, in, out) with `in_out` (gpt-oss's), with
    its LoRA adapters where `p` has them (mtc --lora-experts: A (E, r, in), B (E, out, r)) merged in
    as PEFT's ParamWrapper merges them for its forward: W_e + scale * B_e A_e (`scale` a number, or
    a function of the stack's name)."""
    scale = scale(name) if callable(scale) else scale
    stem = name[:-len(".weight")]
    if stem + ".lora_A.weight" not in p:
        return p[name]
    delta = (p[stem + ".lora_B.weight"] @ p[stem + ".lora_A.weight"]) * scale  # (E, out, in)
    return p[name] + (delta.transpose(1, 2) if in_out else delta)


def experts(h, p, prefix, k, normalize, router_logits=None, scale=0.0, drop=None):
    """A mixture of SwiGLU experts as Hugging Face's Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock
    compute it: softmax over the router's logits, the top k (renormalised when `normalize`), each
    expert over the tokens routed to it, the outputs weighed and index-added back per expert.
    The router's logits (N, E) are appended to `router_logits` when given. Stacks with LoRA
    adapters in `p` have them merged in at `scale` (expert_stack); with `drop` (mtc --lora-dropout)
    their adapters apart instead, as PEFT's per-expert layers run them (experts_dropped)."""
    shape = h.shape
    x = h.reshape(-1, shape[-1])
    logits = x @ p[prefix + "router.weight"].t()
    if router_logits is not None:
        router_logits.append(logits)
    probs = torch.softmax(logits, dim=-1)
    weights, chosen = torch.topk(probs, k, dim=-1)
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    adapted = [n for n in ("gate", "up", "down") if prefix + n + ".lora_A.weight" in p]
    if drop is not None and adapted:
        if len(adapted) != 3:
            raise ValueError(f"experts_dropped runs adapters on all three stacks, not {adapted} alone")
        return experts_dropped(x, p, prefix, chosen, weights, scale, drop).view(shape)
    out = torch.zeros_like(x)
    gate, up, down = (expert_stack(p, prefix + n + ".weight", scale) for n in ("gate", "up", "down"))
    for e in range(gate.shape[0]):
        token, slot = torch.where(chosen == e)
        if len(token) == 0:
            continue
        xe = x[token]
        y = (F.silu(xe @ gate[e].t()) * (xe @ up[e].t())) @ down[e].t()
        out = out.index_add(0, token, y * weights[token, slot, None])
    return out.view(shape)


def experts_dropped(x, p, prefix, chosen, weights, scale, drop):
    """The experts of `experts` with LoRA dropout: the routed rows (T*k, D) ordered as mt.moe_dispatch
    orders them (by expert, each expert's by token: its stable counting sort), each product's input
    rows through `drop` as a whole (one mt.dropout site a product: gate's, up's, down's, the order
    models/ModelBuilder.cpp builds them in), then each expert's rows x W_e^T + s (x' A_e^T) B_e^T,
    x' its dropped rows. Adapters on all three stacks."""
    E = p[prefix + "gate.weight"].shape[0]
    routed = [torch.where(chosen == e) for e in range(E)]  # (tokens, slots), each expert's in token order
    counts = [len(token) for token, _ in routed]
    rows = x[torch.cat([token for token, _ in routed])]

    def product(r, name):
        stem = prefix + name
        s = scale(stem + ".weight") if callable(scale) else scale
        w, a, b = p[stem + ".weight"], p[stem + ".lora_A.weight"], p[stem + ".lora_B.weight"]
        dropped = drop(r)
        return torch.cat([r_e @ w[e].t() + s * ((d_e @ a[e].t()) @ b[e].t())
                          for e, (r_e, d_e) in enumerate(zip(r.split(counts), dropped.split(counts)))])
    gate = product(rows, "gate")
    up = product(rows, "up")
    y = product(F.silu(gate) * up, "down")
    out = torch.zeros_like(x)
    for (token, slot), y_e in zip(routed, y.split(counts)):
        out = out.index_add(0, token, y_e * weights[token, slot, None])
    return out


def gpt_oss_experts(h, p, prefix, k, limit, router_logits=None, scale=0.0):
    """gpt-oss's experts under our parameter names (gpt_oss_mlp), stacks with LoRA adapters merged
    in at `scale` (expert_stack, each expert (in, out))."""
    names = ("router.weight", "router.bias", "gate_up.weight", "gate_up.bias", "down.weight", "down.bias")
    return gpt_oss_mlp(h, *(expert_stack(p, prefix + n, scale, True) if n in ("gate_up.weight", "down.weight")
                            else p[prefix + n] for n in names), k, limit, router_logits)


def gpt_oss_mlp(h, router, router_bias, gate_up, gate_up_bias, down, down_bias, k, limit, router_logits=None):
    """gpt-oss's experts as Hugging Face's GptOssMLP computes them (its training loop over the
    experts hit): a biased router, the top k logits softmaxed, gate_up (E, D, 2F) with gate and up
    interleaved, the clamped SwiGLU, down (E, F, D), a bias after each product."""
    shape = h.shape
    x = h.reshape(-1, shape[-1])
    logits = x @ router.t() + router_bias
    if router_logits is not None:
        router_logits.append(logits)
    top, chosen = torch.topk(logits, k, dim=-1)
    weights = torch.softmax(top, dim=1)
    out = torch.zeros_like(x)
    for e in range(gate_up.shape[0]):
        token, slot = torch.where(chosen == e)
        if len(token) == 0:
            continue
        gu = x[token] @ gate_up[e] + gate_up_bias[e]
        gate, up = gu[..., ::2].clamp(min=None, max=limit), gu[..., 1::2].clamp(min=-limit, max=limit)
        y = ((up + 1) * (gate * torch.sigmoid(gate * 1.702))) @ down[e] + down_bias[e]
        out = out.index_add(0, token, y * weights[token, slot, None])
    return out.view(shape)


def load_balancing_loss(router_logits, num_experts, top_k):
    """Hugging Face's load_balancing_loss_func without an attention mask (Mixtral, Qwen3-MoE):
    over the layers' router logits concatenated, the fraction of the top-k choices each expert
    got times its mean softmax probability, summed, times the number of experts."""
    logits = torch.cat(router_logits, dim=0)
    probs = torch.softmax(logits, dim=-1)
    _, chosen = torch.topk(probs, top_k, dim=-1)
    mask = F.one_hot(chosen, num_experts).float()  # (rows, k, E)
    tokens_per_expert = mask.mean(dim=0)
    prob_per_expert = probs.mean(dim=0)
    return (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * num_experts


def adapted(h, p, name, scale, drop=None):
    """h @ W^T for weight `name`, plus its LoRA adapters' scale * (drop(h) @ A^T) @ B^T where `p`
    has them (mtc --lora: `X.lora_A.weight`, `X.lora_B.weight` beside `X.weight`; `drop`:
    --lora-dropout's, called once per adapted product as mt-lora numbers its sites). With a DoRA
    magnitude `X.lora_magnitude_vector` (mtc --lora-dora), PEFT's DoraLinearLayer.forward instead
    (its order of operations; mt-lora's is g * (y + s (x A^T) B^T) without dropout, the same sum
    rounded otherwise): (g - 1) * (x W^T) + g * lora * scale, g = m /
    ||W + scale * B A|| (rows), the norm detached, x the dropped input (PEFT's base_result is the
    product itself without dropout). `scale`: a number, or a function of the weight's name (mtc
    --lora-rank-pattern, --lora-alpha-pattern)."""
    scale = scale(name) if callable(scale) else scale
    y = h @ p[name].t()
    stem = name[:-len(".weight")]
    a, b = stem + ".lora_A.weight", stem + ".lora_B.weight"
    if a in p:
        x = drop(h) if drop else h
        lora = (x @ p[a].t()) @ p[b].t()
        m = p.get(stem + ".lora_magnitude_vector")
        if m is None:
            return y + lora * scale
        norm = torch.linalg.norm(p[name] + scale * (p[b] @ p[a]).detach(), dim=1).detach()
        g = (m / norm).view(1, -1)
        base = x @ p[name].t() if drop else y
        y = y + ((g - 1) * base + g * lora * scale)
    return y


def forward(p, cfg, tokens, router_logits=None):
    """Logits of models/ModelBuilder.cpp's gpt2 / llama graph; a mixture of experts' router
    logits, layer by layer, appended to `router_logits` when given. Weights with LoRA adapters in
    `p` add them, scaled by cfg["lora_scale"] (alpha / r, or alpha / sqrt(r) rank-stabilised; a
    number, or a function of the weight's name where ranks and alphas differ by weight), their
    input through cfg["lora_drop"] where given (mtc --lora-dropout)."""
    scale, drop = cfg.get("lora_scale", 0.0), cfg.get("lora_drop")
    L, C, H, KV = cfg["layers"], cfg["width"], cfg["heads"], cfg["kv_heads"]
    eps = cfg.get("eps", 1e-5)
    B, T = tokens.shape
    if cfg["family"] == "gpt2":
        x = p["wte.weight"][tokens] + p["wpe.weight"][torch.arange(T)][None]
        for l in range(L):
            b = f"blocks.{l}."
            lin = lambda h, n: adapted(h, p, b + n + ".weight", scale, drop) + p[b + n + ".bias"]
            h = F.layer_norm(x, (C,), p[b + "ln1.weight"], p[b + "ln1.bias"], eps)
            a = attention(lin(h, "attn.q"), lin(h, "attn.k"), lin(h, "attn.v"), H, H)
            x = x + lin(a, "attn.proj")
            h = F.layer_norm(x, (C,), p[b + "ln2.weight"], p[b + "ln2.bias"], eps)
            x = x + lin(F.gelu(lin(h, "mlp.fc"), approximate="tanh"), "mlp.proj")
        x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
        head = p["wte.weight"] if cfg["tied"] else p["lm_head.weight"]
    else:
        D, theta = cfg.get("head_dim", C // H), cfg.get("rope_theta", 10000.0)

        def head_norm(x, name):  # Qwen3's q_norm / k_norm: RMSNorm of each head over its width
            if name not in p:
                return x
            B_, T_, W = x.shape
            if p[name].numel() == W:  # OLMo 2's and OLMoE's: over the whole projection
                return rms_norm(x, p[name], eps)
            return rms_norm(x.view(B_, T_, W // D, D), p[name], eps).view(B_, T_, W)
        x = p["embed.weight"][tokens]
        for l in range(L):
            b = f"layers.{l}."
            # q/k/v carry biases in a Qwen2-shaped model (qkv_bias), and o too in gpt-oss's.
            lin = lambda h, n: adapted(h, p, b + n + ".weight", scale, drop) + (p[b + n + ".bias"] if b + n + ".bias" in p else 0)
            h = rms_norm(x, p[b + "attn_norm.weight"], eps)
            q = rope(head_norm(lin(h, "attn.q"), b + "attn.q_norm.weight"), D, theta)
            k = rope(head_norm(lin(h, "attn.k"), b + "attn.k_norm.weight"), D, theta)
            window = cfg.get("window", 0) if l in cfg.get("sliding_layers", ()) else 0
            a = attention(q, k, lin(h, "attn.v"), H, KV, window, p.get(b + "attn.sinks"))
            x = x + lin(a, "attn.o")
            h = rms_norm(x, p[b + "mlp_norm.weight"], eps)
            if b + "moe.gate_up.weight" in p:
                x = x + gpt_oss_experts(h, p, b + "moe.", cfg["experts_per_token"], cfg["swiglu_limit"], router_logits,
                                        scale)
            elif b + "moe.router.weight" in p:
                # Qwen2-MoE's shared expert (before the router, in Qwen2MoeSparseMoeBlock's order), its
                # output times sigmoid of its gate's, beside the routed experts'.
                shared = (lin(F.silu(lin(h, "moe.shared.gate")) * lin(h, "moe.shared.up"), "moe.shared.down")
                          if b + "moe.shared_gate.weight" in p else None)
                y = experts(h, p, b + "moe.", cfg["experts_per_token"], cfg.get("normalize_topk", True),
                            router_logits, scale, drop)
                x = x + (y if shared is None else y + torch.sigmoid(lin(h, "moe.shared_gate")) * shared)
            else:
                x = x + lin(F.silu(lin(h, "mlp.gate")) * lin(h, "mlp.up"), "mlp.down")
        x = rms_norm(x, p["norm.weight"], eps)
        head = p["embed.weight"] if cfg["tied"] else p["lm_head.weight"]
    return x @ head.t()


def finish(name, failures):
    """Prints the first mismatches and the verdict of test `name`; exits 1 if anything failed."""
    for f in failures[:20]:
        print("MISMATCH:", f)
    print(f"{name}: {'FAILED' if failures else 'passed'}")
    sys.exit(1 if failures else 0)


def rel_err(a, b):
    return float((a - b).norm() / max(float(b.norm()), 1e-30))
