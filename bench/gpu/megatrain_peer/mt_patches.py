"""Runtime adapters that let unmodified MegaTrain (DLYuanGod/MegaTrain@919520f)
run on the lent H200 box (no flash-attn, no deepspeed, no internet).

1. sdpa 2-D mask adapter.  MegaTrain's single-GPU path passes the raw [B,T]
   padding mask straight into every decoder layer (infinity/model/cpu_master.py
   line 1299 `mask = attention_mask.to(ctx.device)` -> line 932
   `'attention_mask': mask`).  Only HF's flash_attention_2 accepts that; HF
   sdpa/eager would crash.  We wrap the registered "sdpa" attention function:
   an all-ones mask becomes None (-> SDPA causal flash kernel, the same work FA2
   does), a real padding mask becomes a [B,1,T,S] bool causal&padding mask.
2. fast random init: HF init of 7.6B params with Tensor.normal_ on CPU can take a
   minute; during model construction we fill from a fixed N(0,1) pool instead.
3. from_pretrained -> from_config when the model folder holds no weights, so the
   15 GB random checkpoint never has to be written and read back.
4. optional (MT_FUSED_ADAMW=1): torch.optim.AdamW(fused=True) on CPU, as a stand-in
   for DeepSpeedCPUAdam which the paper setup used.
"""
import contextlib
import glob
import os
import sys

import torch

_LOG = lambda *a: print("[mt_patches]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- 1. sdpa
def install_sdpa_mask_adapter():
    from transformers.integrations import sdpa_attention as _sd
    orig = _sd.sdpa_attention_forward
    last = [None, None]  # (mask object seen last, converted mask)

    def mt_sdpa(module, query, key, value, attention_mask, *args, **kwargs):
        m = attention_mask
        if m is not None and m.dim() == 2:
            if last[0] is m:
                m = last[1]
            else:
                src = m
                if bool(m.all()):           # one host sync per step (mask object is reused by all layers)
                    conv = None
                else:
                    T, S = query.shape[-2], key.shape[-2]
                    keep = m.to(device=query.device, dtype=torch.bool)[:, None, None, :S]
                    causal = torch.ones(T, S, dtype=torch.bool, device=query.device).tril(S - T)
                    conv = causal[None, None] & keep
                last[0], last[1] = src, conv
                m = conv
        return orig(module, query, key, value, m, *args, **kwargs)

    done = []
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    for how, fn in (
        ("ALL_ATTENTION_FUNCTIONS.register", lambda: ALL_ATTENTION_FUNCTIONS.register("sdpa", mt_sdpa)),
        ("ALL_ATTENTION_FUNCTIONS[sdpa]=", lambda: ALL_ATTENTION_FUNCTIONS.__setitem__("sdpa", mt_sdpa)),
        ("_global_mapping[sdpa]=", lambda: type(ALL_ATTENTION_FUNCTIONS)._global_mapping.__setitem__("sdpa", mt_sdpa)),
    ):
        try:
            fn()
            done.append(how)
        except Exception as e:  # pragma: no cover
            _LOG(how, "failed:", repr(e))
    try:
        assert ALL_ATTENTION_FUNCTIONS["sdpa"] is mt_sdpa
    except Exception as e:
        raise RuntimeError(f"sdpa mask adapter not active: {e!r}")
    if not done:
        raise RuntimeError("could not install sdpa mask adapter")
    _LOG("sdpa 2-D mask adapter installed via", ", ".join(done))


# ---------------------------------------------------------------- 2. fast init
@contextlib.contextmanager
def fast_random_init(pool_elems=1 << 22, seed=1234):
    """Replace Tensor.normal_/uniform_ for large contiguous CPU float tensors with a
    copy from a fixed N(0,1) pool (scaled to the requested mean/std).  Weights are
    periodic, which is irrelevant for a throughput benchmark."""
    orig_normal, orig_uniform = torch.Tensor.normal_, torch.Tensor.uniform_
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(pool_elems, generator=g)
    pools = {}

    def fill(t, scale, shift):
        if (t.device.type != "cpu" or not t.is_floating_point() or not t.is_contiguous()
                or t.numel() < (1 << 16)):
            return False
        p = pools.get(t.dtype)
        if p is None:
            p = pools[t.dtype] = base.to(t.dtype)
        flat, n, L = t.detach().view(-1), t.numel(), p.numel()
        with torch.no_grad():
            for s in range(0, n, L):
                e = min(n, s + L)
                flat[s:e].copy_(p[: e - s])
            if scale != 1.0:
                flat.mul_(scale)
            if shift != 0.0:
                flat.add_(shift)
        return True

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        return self if fill(self, float(std), float(mean)) else orig_normal(self, mean, std, generator=generator)

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        # same mean / variance as U(a,b)
        return self if fill(self, (float(b) - float(a)) / 12 ** 0.5, (float(a) + float(b)) / 2) \
            else orig_uniform(self, a, b, generator=generator)

    torch.Tensor.normal_, torch.Tensor.uniform_ = normal_, uniform_
    try:
        yield
    finally:
        torch.Tensor.normal_, torch.Tensor.uniform_ = orig_normal, orig_uniform


def build_random_model(model_dir, dtype=torch.bfloat16, attn_implementation="sdpa"):
    import time
    from transformers import AutoConfig, AutoModelForCausalLM
    t0 = time.time()
    cfg = AutoConfig.from_pretrained(model_dir)
    with fast_random_init():
        try:
            m = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation=attn_implementation)
        except TypeError:
            m = AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype, attn_implementation=attn_implementation)
    m = m.to(dtype)  # no-op when already bf16
    m.eval()         # from_pretrained also returns eval mode (dropout is 0 for Qwen2 anyway)
    n = sum(p.numel() for p in m.parameters())
    _LOG(f"random model built from config in {time.time()-t0:.1f}s: {n:,} params, "
         f"dtype={next(m.parameters()).dtype}, attn={getattr(m.config, '_attn_implementation', '?')}")
    return m


# ---------------------------------------------------------------- 3. from_pretrained -> from_config
def install_from_config_loader():
    from transformers import AutoModelForCausalLM
    orig = AutoModelForCausalLM.from_pretrained

    def from_pretrained(cls, name, *args, **kwargs):
        if os.path.isdir(name) and not (glob.glob(os.path.join(name, "*.safetensors"))
                                        or glob.glob(os.path.join(name, "*.bin"))):
            dtype = kwargs.get("torch_dtype", kwargs.get("dtype", torch.bfloat16))
            attn = kwargs.get("attn_implementation", "sdpa")
            _LOG(f"{name} has no weights -> building random-weight model from config.json")
            return build_random_model(name, dtype=dtype, attn_implementation=attn)
        return orig(name, *args, **kwargs)

    AutoModelForCausalLM.from_pretrained = classmethod(from_pretrained)
    _LOG("AutoModelForCausalLM.from_pretrained: weight-less folders are built from config")


# ---------------------------------------------------------------- 4. fused AdamW (optional)
def install_fused_adamw():
    base = torch.optim.AdamW

    class FusedCPUAdamW(base):
        def __init__(self, params, *args, **kwargs):
            kwargs.setdefault("fused", True)
            try:
                super().__init__(params, *args, **kwargs)
            except Exception as e:
                _LOG("fused AdamW refused, falling back to default:", repr(e))
                kwargs.pop("fused", None)
                super().__init__(params, *args, **kwargs)

    torch.optim.AdamW = FusedCPUAdamW
    _LOG("torch.optim.AdamW -> fused=True (CPU fused kernel)")


def install_all():
    install_sdpa_mask_adapter()
    install_from_config_loader()
    if os.environ.get("MT_FUSED_ADAMW") == "1":
        install_fused_adamw()
