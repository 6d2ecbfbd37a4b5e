"""PyTorch native training of the bench Llama shapes on one GPU (the peer of bench/gpu/run.sh):
the same architecture (RMSNorm, RoPE, SwiGLU, grouped-query attention through
scaled_dot_product_attention), AdamW (fused) on GPU-resident fp32 parameters, batch 4 x 1024,
in exact fp32 and in TF32; for a bf16 bench plan (NAME-mixed) the same model under bf16 autocast
(SDPA's flash kernels) at the largest batch of 64, 32, 16, 8, 4 that fits, with the tokens/s
(our bf16 plan's peer). Prints one 'torch ...' line per run; 'does not fit' where the
parameters, gradients, moments and activations exceed the GPU's memory."""
import gc
import os
import time

import torch
import torch.nn.functional as F

# name: layers, width, heads, kv_heads, ffn, vocab, tied (models/BuiltinModels.cpp)
SHAPES = {
    "llama-1b": (16, 2048, 32, 8, 8192, 128256, True),
    "llama-3b": (28, 3072, 24, 8, 8192, 128256, True),
    "llama-7b": (32, 4096, 32, 32, 11008, 32000, False),
}
BATCH, SEQ, STEPS = 4, 1024, 4


class Llama(torch.nn.Module):
    def __init__(self, layers, width, heads, kv_heads, ffn, vocab, tied):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        self.embed = torch.nn.Embedding(vocab, width)
        kv = kv_heads * self.head_dim
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            layer = torch.nn.ModuleDict({
                "attn_norm": torch.nn.RMSNorm(width, eps=1e-5), "q": torch.nn.Linear(width, width, bias=False),
                "k": torch.nn.Linear(width, kv, bias=False), "v": torch.nn.Linear(width, kv, bias=False),
                "o": torch.nn.Linear(width, width, bias=False), "mlp_norm": torch.nn.RMSNorm(width, eps=1e-5),
                "gate": torch.nn.Linear(width, ffn, bias=False), "up": torch.nn.Linear(width, ffn, bias=False),
                "down": torch.nn.Linear(ffn, width, bias=False)})
            self.layers.append(layer)
        self.norm = torch.nn.RMSNorm(width, eps=1e-5)
        self.head = None if tied else torch.nn.Linear(width, vocab, bias=False)
        half = self.head_dim // 2
        inv_freq = 1.0 / (500000.0 ** (torch.arange(0, half).float() * 2 / self.head_dim))
        angles = torch.arange(SEQ).float()[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos()[None, :, None, :], persistent=False)
        self.register_buffer("sin", angles.sin()[None, :, None, :], persistent=False)

    def rope(self, x):
        b, t, h, d = x.shape
        x1, x2 = x[..., :d // 2], x[..., d // 2:]
        return torch.cat([x1 * self.cos - x2 * self.sin, x2 * self.cos + x1 * self.sin], dim=-1)

    def forward(self, tokens):
        b, t = tokens.shape
        x = self.embed(tokens)
        for layer in self.layers:
            h = layer["attn_norm"](x)
            q = self.rope(layer["q"](h).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
            k = self.rope(layer["k"](h).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)
            v = layer["v"](h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
            x = x + layer["o"](a.transpose(1, 2).reshape(b, t, -1))
            h = layer["mlp_norm"](x)
            x = x + layer["down"](F.silu(layer["gate"](h)) * layer["up"](h))
        x = self.norm(x)
        return x @ self.embed.weight.t() if self.head is None else self.head(x)


def parameter_count(layers, width, heads, kv_heads, ffn, vocab, tied):
    kv = kv_heads * (width // heads)
    per_layer = 2 * width + 2 * width * width + 2 * width * kv + 3 * width * ffn
    return vocab * width * (1 if tied else 2) + layers * per_layer + width


def run(name, mode, batch=BATCH):
    # Parameters, gradients and two AdamW moments alone (16 bytes/param) past the GPU's memory:
    # say so without building the model (a 7B fp32 model takes minutes to initialise on the CPU).
    state = 16 * parameter_count(*SHAPES[name])
    total = torch.cuda.get_device_properties(0).total_memory
    if state > total:
        print(f"torch {name} {mode}: does not fit in GPU memory ({state / 2**30:.0f} GiB of parameters, "
              f"gradients and AdamW moments; {total / 2**30:.0f} GiB on the GPU)")
        return "skipped"
    tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    try:
        model = Llama(*SHAPES[name]).cuda()
        params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        tokens = torch.randint(0, SHAPES[name][5], (batch, SEQ + 1), device="cuda")
        times = []
        for _ in range(STEPS):
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
                logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        step = sorted(times[1:])[len(times[1:]) // 2]
        tflops = 6 * params * batch * SEQ / step / 1e12
        print(f"torch {name} {mode}: batch {batch} x {SEQ}, {step * 1e3:.1f} ms/step, {batch * SEQ / step:.0f} tokens/s, "
              f"{tflops:.2f} model TFLOP/s ({params / 1e9:.2f} B params, peak "
              f"{torch.cuda.max_memory_allocated() / 2**30:.1f} GiB)")
        return "ok"
    except torch.OutOfMemoryError:
        print(f"torch {name} {mode}: batch {batch} does not fit in GPU memory (parameters, gradients, AdamW "
              f"moments, activations)")
        return "oom"


if __name__ == "__main__":
    import sys
    for arg in sys.argv[1:] or SHAPES:
        name = arg.removesuffix("-mixed")
        if name not in SHAPES:
            print(f"torch {arg}: no PyTorch twin of this shape")
            continue
        # BENCH_TORCH_BATCHES="16": start the bf16 search there (the largest that fit before).
        batches = [int(b) for b in os.environ.get("BENCH_TORCH_BATCHES", "64 32 16 8 4").split()]
        runs = [("bf16", b) for b in batches] if arg.endswith("-mixed") else [("fp32", BATCH), ("tf32", BATCH)]
        for mode, batch in runs:
            result = run(name, mode, batch)
            gc.collect()  # the run's model and optimizer state are garbage now: give their memory back
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            if result == "skipped" or (mode == "bf16" and result == "ok"):
                break
