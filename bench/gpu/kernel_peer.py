"""PyTorch's rate for the cases bench/gpu_kernel_rate.cc times (the peer measured in the same call):
causal bf16 attention through scaled_dot_product_attention (its flash kernels), forward and
backward, and bf16 products (cuBLAS through torch.matmul) at 8192^3 and the models' linear
shapes. Random inputs, CUDA events, the median of 9 timed regions after a warm-up. Prints
lines in mt_gpu_kernel_rate's words, prefixed 'torch'."""
import torch
import torch.nn.functional as F


def median_ms(fn):
    fn(); fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); fn(); stop.record(); stop.synchronize()
    calls = max(1, min(100, int(1.0 / max(start.elapsed_time(stop), 1e-3))))
    times = []
    for _ in range(9):
        start.record()
        for _ in range(calls):
            fn()
        stop.record(); stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return sorted(times)[4]


def attention(name, batch, seq, heads, kv_heads, head_dim):
    q = torch.randn(batch, heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(batch, kv_heads, seq, head_dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    gqa = heads != kv_heads
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    dout = torch.randn_like(out)
    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa))
    both = median_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa),
                                                 (q, k, v), dout))
    bwd = both - fwd
    flops = 2.0 * batch * heads * seq * seq * head_dim
    print(f"torch attention {name} (batch {batch}, T {seq}, {heads}/{kv_heads} heads of {head_dim}): forward "
          f"{fwd:.3f} ms {flops / fwd / 1e9:.1f} TFLOP/s, backward {bwd:.3f} ms {2.5 * flops / bwd / 1e9:.1f} TFLOP/s")


def gemm(m, n, k):
    a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) - 0.5
    b = (torch.rand(n, k, device="cuda", dtype=torch.bfloat16) - 0.5) * 0.1
    return 2.0 * m * n * k / median_ms(lambda: a @ b.t()) / 1e9


if __name__ == "__main__":
    for case in [("T4096-d128", 4, 4096, 32, 8, 128), ("qwen2.5-7b", 16, 1024, 28, 4, 128),
                 ("llama-1b", 16, 1024, 32, 8, 64)]:
        attention(*case)
    peak = gemm(8192, 8192, 8192)
    print(f"torch gemm 8192^3 bf16: {peak:.1f} TFLOP/s")
    for model, tokens, linears in [
            ("llama-1b", 4096, [("q/o", 2048, 2048), ("k/v", 2048, 512), ("gate/up", 2048, 8192), ("down", 8192, 2048),
                                ("head", 2048, 128256)]),
            ("qwen2.5-7b", 16384, [("q/o", 3584, 3584), ("k/v", 3584, 512), ("gate/up", 3584, 18944),
                                   ("down", 18944, 3584), ("head", 3584, 152064)])]:
        for name, fan_in, fan_out in linears:
            rate = gemm(tokens, fan_out, fan_in)
            print(f"torch gemm {model} {name} ({fan_in} x {fan_out}, {tokens} rows): forward {rate:.1f} TFLOP/s "
                  f"({100 * rate / peak:.0f}% of 8192^3)")
