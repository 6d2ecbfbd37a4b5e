"""Plain-PyTorch GPT-2-style and Llama-style models and their ONNX exports, for mtc's ONNX
import and its tests. Nothing here is MegaTrain-specific: it is what a user brings.

usage: /usr/bin/python3 models/onnx_export.py FAMILY OUT.onnx [--opset 17] [--mode train|eval]
           [--batch 4] [--seq 32] [--layers 2] [--width 64] [--heads 4] [--kv-heads 2]
           [--vocab 256] [--seed 0] [--state OUT.pt] [--with-loss] [--external] [--gelu exact|tanh]
FAMILY is gpt2 (LayerNorm, exact GELU, learned positions, tied embeddings), llama (RMSNorm,
RoPE, SwiGLU, grouped-query attention, untied head) or mha (torch's nn.MultiheadAttention with a
causal mask buffer, nn.Sequential MLPs, learned positions, untied head). --state also saves the initial weights
(torch.save of the state_dict) for a PyTorch run from the same start. --with-loss exports
a graph that takes (tokens, targets) and returns the mean cross-entropy (SoftmaxCrossEntropyLoss);
--external stores the initializers in an external-data file beside the model (OUT.onnx.data), as
exports of models over 2 GB must.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, kv_heads, bias, rope_theta=None, context=1024):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.q = nn.Linear(width, width, bias=bias)
        self.k = nn.Linear(width, kv_heads * self.head_dim, bias=bias)
        self.v = nn.Linear(width, kv_heads * self.head_dim, bias=bias)
        self.proj = nn.Linear(width, width, bias=bias)
        self.rope_theta = rope_theta
        self.register_buffer("mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def rope(self, x):  # x: (B, H, T, D), rotate-half convention
        t, d = x.shape[2], self.head_dim
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(t, dtype=torch.float32), inv)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, x):
        b, t, c = x.shape
        q = self.q(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.rope_theta is not None:
            q, k = self.rope(q), self.rope(k)
        if self.kv_heads != self.heads:  # each kv head serves heads // kv_heads query heads
            rep = self.heads // self.kv_heads
            k = k[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, rep, t, self.head_dim).reshape(b, self.heads, t, self.head_dim)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, family, width, heads, kv_heads, ffn, gelu, dropout=None):
        super().__init__()
        self.family, self.gelu = family, gelu
        # nanoGPT's residual dropouts: on the attention's and the MLP's outputs.
        self.drop = nn.Dropout(dropout) if dropout is not None else nn.Identity()
        gpt2 = family == "gpt2"
        self.ln1 = nn.LayerNorm(width) if gpt2 else RMSNorm(width)
        self.ln2 = nn.LayerNorm(width) if gpt2 else RMSNorm(width)
        self.attn = CausalSelfAttention(width, heads, kv_heads, bias=gpt2, rope_theta=None if gpt2 else 10000.0)
        if gpt2:
            self.fc = nn.Linear(width, ffn)
            self.out = nn.Linear(ffn, width)
        else:
            self.gate = nn.Linear(width, ffn, bias=False)
            self.up = nn.Linear(width, ffn, bias=False)
            self.down = nn.Linear(ffn, width, bias=False)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln1(x)))
        h = self.ln2(x)
        if self.family == "gpt2":
            return x + self.drop(self.out(F.gelu(self.fc(h), approximate="tanh" if self.gelu == "tanh" else "none")))
        return x + self.drop(self.down(F.silu(self.gate(h)) * self.up(h)))


class LM(nn.Module):
    def __init__(self, family, layers, width, heads, kv_heads, vocab, context=1024, gelu="exact", dropout=None):
        super().__init__()
        self.family = family
        # nanoGPT's dropout after the embeddings, and (not nanoGPT's) before the final norm; the
        # blocks' residual dropouts (None: no module at all).
        self.drop = nn.Dropout(dropout) if dropout is not None else nn.Identity()
        ffn = 4 * width if family == "gpt2" else (8 * width // 3 + 7) // 8 * 8
        self.wte = nn.Embedding(vocab, width)
        if family == "gpt2":
            self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(family, width, heads, kv_heads, ffn, gelu, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width) if family == "gpt2" else RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        if family == "gpt2":
            self.head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens):
        x = self.wte(tokens)
        if self.family == "gpt2":
            x = x + self.wpe(torch.arange(tokens.shape[1]))
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(self.drop(x)))


class MhaBlock(nn.Module):
    """A pre-norm block on torch's own nn.MultiheadAttention (causal through a float mask
    buffer) and an nn.Sequential MLP: what a user writing against torch's modules brings."""

    def __init__(self, width, heads, context):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.register_buffer("mask", torch.triu(torch.full((context, context), float("-inf")), diagonal=1))

    def forward(self, x):
        h, t = self.ln1(x), x.shape[1]
        x = x + self.attn(h, h, h, attn_mask=self.mask[:t, :t], need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class MhaLM(nn.Module):
    def __init__(self, layers, width, heads, vocab, context):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList([MhaBlock(width, heads, context) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class WithLoss(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens, targets):
        logits = self.lm(tokens)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["gpt2", "llama", "mha"])
    ap.add_argument("out")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--mode", choices=["train", "eval"], default="train")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--state")
    ap.add_argument("--with-loss", action="store_true")
    ap.add_argument("--external", action="store_true")
    ap.add_argument("--gelu", choices=["exact", "tanh"], default="exact", help="GPT-2's GELU (GPT-2 itself: tanh)")
    ap.add_argument("--dropout", type=float, default=None, help="nn.Dropout(p) modules, as nanoGPT has them")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    kv = a.kv_heads or (a.heads if a.family == "gpt2" else max(1, a.heads // 2))
    if a.family == "mha":  # the context is the export's sequence: the mask buffer folds whole
        model = MhaLM(a.layers, a.width, a.heads, a.vocab, a.seq)
    else:
        model = LM(a.family, a.layers, a.width, a.heads, kv, a.vocab, gelu=a.gelu, dropout=a.dropout)
    if a.state:
        torch.save(model.state_dict(), a.state)
    tokens = torch.zeros(a.batch, a.seq, dtype=torch.long)
    if a.mode == "train":
        kwargs = dict(training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    else:
        kwargs = dict(training=torch.onnx.TrainingMode.EVAL, do_constant_folding=True)
    if a.with_loss:
        torch.onnx.export(WithLoss(model), (tokens, tokens.clone()), a.out, opset_version=a.opset,
                          input_names=["tokens", "targets"], output_names=["loss"], **kwargs)
    else:
        torch.onnx.export(model, (tokens,), a.out, opset_version=a.opset, input_names=["tokens"],
                          output_names=["logits"], **kwargs)
    if a.external:
        import os
        import onnx
        m = onnx.load(a.out)
        onnx.save_model(m, a.out, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(a.out) + ".data", size_threshold=0)


if __name__ == "__main__":
    main()
