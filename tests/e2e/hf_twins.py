"""The transformers-style twins of the Hugging Face folders the tests write (hf_folders.py): logits
as transformers' modeling code computes them in f32 (eager attention), and how closely mtrun must
follow them (LOSS_TOL over the steps, GRAD_TOL for the first step's gradients). hf_import.py checks
our runtime against them; the fine-tuning tests (preference, kto, reward, sft_pipeline,
packed_examples) train against them, and bench/gpu/hf_transformers_check.py compares transformers
itself with them on the GPU machine."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mt_reference as ref  # noqa: E402

LOSS_TOL, GRAD_TOL = 1e-4, 1e-5
GEMMAS = ("gemma", "gemma2", "gemma3_text")  # model_types of Gemma's norms, scaled embedding and GeGLU


def gpt2_logits(p, cfg, tokens):
    """Logits as transformers' GPT2LMHeadModel computes them (eager attention, no dropout)."""
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    D, (B, T) = C // H, tokens.shape

    def conv1d(x, name):  # transformers' Conv1D: x @ W + b, W stored [in, out]
        return x @ p[name + ".weight"] + p[name + ".bias"]

    def norm(x, name):
        return F.layer_norm(x, (C,), p[name + ".weight"], p[name + ".bias"], eps)

    x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][:T]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(cfg["n_layer"]):
        pre = f"transformer.h.{l}."
        q, k, v = conv1d(norm(x, pre + "ln_1"), pre + "attn.c_attn").split(C, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        o = (torch.softmax(q @ k.transpose(2, 3) / math.sqrt(D) + mask, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(o, pre + "attn.c_proj")
        h = F.gelu(conv1d(norm(x, pre + "ln_2"), pre + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(h, pre + "mlp.c_proj")
    return F.linear(norm(x, "transformer.ln_f"), p["transformer.wte.weight"])


def moe_layer(cfg, layer):
    """Whether transformers' Qwen3-MoE / Qwen2-MoE / Mixtral / OLMoE / GraniteMoE / GLM-4.5 put experts in
    `layer` (decoder_sparse_step, mlp_only_layers; GLM-4.5's after its first_k_dense_replace dense layers)."""
    if cfg["model_type"] in ("mixtral", "olmoe", "granitemoe"):
        return True
    if cfg["model_type"] in ("glm4_moe", "deepseek_v3", "deepseek_v2"):
        default_dense = {"glm4_moe": 1, "deepseek_v3": 3, "deepseek_v2": 0}[cfg["model_type"]]
        return layer >= cfg.get("first_k_dense_replace", default_dense)
    if cfg["model_type"] == "ernie4_5_moe":  # Ernie4_5_MoeDecoderLayer's rule, Ernie4_5_MoeConfig's defaults
        end = cfg.get("moe_layer_end_index", -1)
        end = cfg["num_hidden_layers"] - 1 if end == -1 else end
        return (layer + 1) % cfg.get("moe_layer_interval", 1) == 0 and cfg.get("moe_layer_start_index", 1) <= layer <= end
    if cfg["model_type"] not in ("qwen3_moe", "qwen2_moe"):
        return False
    return layer not in cfg["mlp_only_layers"] and (layer + 1) % cfg["decoder_sparse_step"] == 0


def sliding_window_of(cfg, layer):
    """The window transformers gives `layer`'s attention (None: all keys before the query)."""
    types = cfg.get("layer_types")
    if types is not None:
        return cfg["sliding_window"] if types[layer] == "sliding_attention" else None
    if cfg["model_type"] == "gemma2":  # Gemma2Config's layer types: the even layers slide
        return cfg["sliding_window"] if layer % 2 == 0 else None
    if cfg["model_type"] == "olmo3":  # Olmo3Config's: every fourth layer full, the others sliding
        return cfg.get("sliding_window", 4096) if (layer + 1) % 4 != 0 else None
    if cfg["model_type"] == "exaone4":  # Exaone4Config's: every sliding_window_pattern-th layer full
        return cfg.get("sliding_window", 4096) if (layer + 1) % cfg.get("sliding_window_pattern", 4) != 0 else None
    return cfg.get("sliding_window") if cfg["model_type"] in ("mistral", "phi3") else None


def hf_gpt_oss_experts(p, cfg, pre, h):
    """GptOssMLP under Hugging Face's names (mt_reference.gpt_oss_mlp computes it)."""
    names = ("mlp.router.weight", "mlp.router.bias", "mlp.experts.gate_up_proj", "mlp.experts.gate_up_proj_bias",
             "mlp.experts.down_proj", "mlp.experts.down_proj_bias")
    return ref.gpt_oss_mlp(h, *(p[pre + n] for n in names), cfg["num_experts_per_tok"], cfg["swiglu_limit"])


def hf_experts(p, cfg, pre, h):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock / OlmoeSparseMoeBlock: softmax of the router's logits (in float),
    the top k (renormalised where the config says), each expert over its tokens, index_add back;
    Qwen2MoeSparseMoeBlock's shared expert added, times sigmoid(shared_expert_gate(x))."""
    mix = cfg["model_type"] == "mixtral"
    block = pre + ("block_sparse_moe." if mix else "mlp.")
    B, T, C = h.shape
    x = h.reshape(-1, C)
    probs = torch.softmax(F.linear(x, p[block + "gate.weight"]), dim=1, dtype=torch.float)
    weights, chosen = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
    if mix or cfg["norm_topk_prob"]:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    mask = F.one_hot(chosen, num_classes=probs.shape[1]).permute(2, 1, 0)
    for e in range(probs.shape[1]):
        slot, token = torch.where(mask[e])
        ex = block + f"experts.{e}."
        w1, w3, w2 = ((ex + n + ".weight" for n in ("w1", "w3", "w2")) if mix else
                      (ex + n + ".weight" for n in ("gate_proj", "up_proj", "down_proj")))
        xe = x[token]
        y = F.linear(F.silu(F.linear(xe, p[w1])) * F.linear(xe, p[w3]), p[w2]) * weights[token, slot, None]
        out.index_add_(0, token, y)
    if "shared_expert_intermediate_size" in cfg:
        shared = block + "shared_expert."
        y = F.linear(F.silu(F.linear(x, p[shared + "gate_proj.weight"])) * F.linear(x, p[shared + "up_proj.weight"]),
                     p[shared + "down_proj.weight"])
        out = out + torch.sigmoid(F.linear(x, p[block + "shared_expert_gate.weight"])) * y
    return out.view(B, T, C)


def hf_glm4_moe_experts(p, cfg, pre, h):
    """Glm4MoeMoE with DeepSeek-V3's router (Glm4MoeTopkRouter): the sigmoid of the router's logits (in
    float), the top k by score + e_score_correction_bias within the topk_group of n_group groups whose two
    best such sums are largest (the others' experts scored 0), their scores renormalised (+ 1e-20) and
    times routed_scaling_factor; each expert over its tokens, index_add back; the shared experts added.
    DeepSeek-V2's (DeepseekV2Moe.route_tokens_to_experts): the softmax of the logits (in float), the top k
    of the probabilities ("greedy") or within the topk_group of n_group groups whose best probabilities
    are largest ("group_limited_greedy"), weighed by those (masked) probabilities times
    routed_scaling_factor, not renormalised."""
    block = pre + "mlp."
    B, T, C = h.shape
    x = h.reshape(-1, C)
    E, k = cfg["n_routed_experts"], cfg["num_experts_per_tok"]
    v2 = cfg["model_type"] == "deepseek_v2"
    grouped = cfg.get("topk_method") == "group_limited_greedy" if v2 else True
    G, chosen_groups = (cfg.get("n_group", 1), cfg.get("topk_group", 1)) if grouped else (1, 1)
    logits = F.linear(x.float(), p[block + "gate.weight"].float())
    scores = logits.softmax(dim=-1) if v2 else logits.sigmoid()
    choice = scores if v2 else scores + p[block + "gate.e_score_correction_bias"]
    if v2:
        group_scores = choice.view(-1, G, E // G).max(dim=-1).values
    else:
        group_scores = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
    group_mask = torch.zeros_like(group_scores).scatter_(
        1, torch.topk(group_scores, k=chosen_groups, dim=-1, sorted=False)[1], 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
    masked = choice.masked_fill(~score_mask.bool(), 0.0)
    top, chosen = torch.topk(masked, k=k, dim=-1, sorted=False)
    weights = top if v2 else scores.gather(1, chosen)
    if not v2 and cfg.get("norm_topk_prob", True):
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    weights = weights * cfg.get("routed_scaling_factor", 1.0)

    def mlp(x, pre):
        return F.linear(F.silu(F.linear(x, p[pre + "gate_proj.weight"])) * F.linear(x, p[pre + "up_proj.weight"]),
                        p[pre + "down_proj.weight"])
    out = torch.zeros_like(x)
    for e in range(E):
        token, slot = torch.where(chosen == e)
        out.index_add_(0, token, mlp(x[token], block + f"experts.{e}.") * weights[token, slot, None])
    return (out + mlp(x, block + "shared_experts.")).view(B, T, C)


def hf_ernie45_moe_experts(p, cfg, pre, h):
    """Ernie4_5_MoeSparseMoeBlock: the shared experts (one SwiGLU MLP moe_num_shared_experts times as wide);
    the softmax of the router's logits in float, the top moe_k of the probabilities + moe_statics'
    e_score_correction_bias (1, E), their probabilities gathered and divided by their sum clamped at
    moe_norm_min; each expert over its tokens, index_add back; the shared experts' output added."""
    block = pre + "mlp."
    B, T, C = h.shape
    x = h.reshape(-1, C)

    def mlp(x, pre):
        return F.linear(F.silu(F.linear(x, p[pre + "gate_proj.weight"])) * F.linear(x, p[pre + "up_proj.weight"]),
                        p[pre + "down_proj.weight"])
    shared = mlp(x, block + "shared_experts.") if cfg.get("moe_num_shared_experts", 2) > 0 else None
    logits = F.linear(x.float(), p[block + "gate.weight"].float())
    probs = F.softmax(logits, dim=1, dtype=torch.float)
    _, chosen = torch.topk(probs + p[block + "moe_statics.e_score_correction_bias"].squeeze(), cfg["moe_k"], dim=-1)
    weights = torch.gather(probs, dim=-1, index=chosen)
    weights = weights / torch.clamp(weights.sum(dim=-1, keepdim=True), min=cfg.get("moe_norm_min", 1e-12))
    out = torch.zeros_like(x)
    for e in range(probs.shape[1]):
        token, slot = torch.where(chosen == e)
        out.index_add_(0, token, mlp(x[token], block + f"experts.{e}.") * weights[token, slot, None])
    return (out if shared is None else out + shared).view(B, T, C)


def hf_granitemoe_experts(p, cfg, pre, h):
    """GraniteMoeMoE: the router's top k logits (in float) and their softmax the gates (JetMoe's
    gating); each expert's input_linear output chunked into gate and up, silu(gate) * up through its
    output_linear, times its gate, index_add back."""
    block = pre + "block_sparse_moe."
    B, T, C = h.shape
    x = h.reshape(-1, C)
    top, chosen = F.linear(x, p[block + "router.layer.weight"]).float().topk(cfg["num_experts_per_tok"], dim=1)
    gates = torch.softmax(top, dim=1)
    out = torch.zeros_like(x)
    for e in range(p[block + "input_linear.weight"].shape[0]):
        token, slot = torch.where(chosen == e)
        gate, up = F.linear(x[token], p[block + "input_linear.weight"][e]).chunk(2, dim=-1)
        out.index_add_(0, token, F.linear(F.silu(gate) * up, p[block + "output_linear.weight"][e]) * gates[token, slot, None])
    return out.view(B, T, C)


def get_mscale(scale, mscale=1):
    """transformers' YaRN get_mscale: the attention factor's parts, DeepSeek's softmax scale's root."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def hf_rope_parameters(cfg, head_dim, seq=None):
    """transformers' rope initialisation (modeling_rope_utils): the inverse frequencies in float32
    over the rotated part of a head (int(head_dim * partial_rotary_factor) elements) and the factor
    cos and sin are multiplied by, for no scaling, "linear", "llama3", "yarn" and "longrope" (whose
    factors of each pair are the long ones for a sequence past the original context, as
    longrope_frequency_update picks them). The settings as transformers 4 writes them (rope_theta,
    rope_scaling) or 5 (rope_parameters)."""
    params = cfg.get("rope_parameters") or {}
    base = params.get("rope_theta", cfg.get("rope_theta"))
    D = int(head_dim * cfg.get("partial_rotary_factor", 0.5 if cfg["model_type"] in ("glm4_moe", "glm4") else 1.0))
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    scaling = cfg.get("rope_scaling") or params
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv_freq, 1.0
    if kind == "longrope":
        original = cfg.get("original_max_position_embeddings")
        factor = cfg["max_position_embeddings"] / original if original else scaling.get("factor", 1.0)
        original = original or cfg["max_position_embeddings"]
        attention_factor = scaling.get("attention_factor")
        if attention_factor is None:
            attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
        ext = torch.tensor(scaling["long_factor"] if seq > original else scaling["short_factor"], dtype=torch.float32)
        return 1.0 / (ext * base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D)), attention_factor
    factor = scaling["factor"]
    if kind == "linear":
        return inv_freq / factor, 1.0
    if kind == "llama3":
        low_freq_factor, high_freq_factor = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old_context_len = scaling["original_max_position_embeddings"]
        low_freq_wavelen, high_freq_wavelen = old_context_len / low_freq_factor, old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama), 1.0
    assert kind == "yarn", kind
    # The factor as given (transformers >= 4.56 and 5; 4.48-4.55 took the two contexts' ratio).
    original = scaling.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    attention_factor = scaling.get("attention_factor")
    if attention_factor is None and scaling.get("mscale") and scaling.get("mscale_all_dim"):
        attention_factor = get_mscale(factor, scaling["mscale"]) / get_mscale(factor, scaling["mscale_all_dim"])
    if attention_factor is None:
        attention_factor = get_mscale(factor)
    beta_fast, beta_slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1

    def find_correction_dim(num_rotations):
        return (D * math.log(original / (num_rotations * 2 * math.pi))) / (2 * math.log(base))
    low, high = find_correction_dim(beta_fast), find_correction_dim(beta_slow)
    if scaling.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, D - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(D // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, D, 2).float() / D)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor, attention_factor


def hf_deepseek_attention(p, cfg, pre, h, mask):
    """DeepseekV3Attention's output before o_proj (B, T, heads x v_head_dim): q through q_proj or its
    bottleneck (q_a_proj, q_a_layernorm, q_b_proj); kv_a_proj_with_mqa's latent through kv_a_layernorm
    and kv_b_proj into each head's unrotated key and value, its last qk_rope_head_dim the rotated key
    every head shares; the rotated parts turned with their pairs interleaved (rope_interleave, as
    apply_rotary_pos_emb_interleave), the scores scaled by qk_head_dim^-1/2 times YaRN's
    mscale(factor, mscale_all_dim)^2 where the config scales the rotary embedding so. DeepSeek-V2's
    (DeepseekV2Attention) alike: it turns its pairs as complex numbers (the same rotations, the elements
    in another order: the same scores), and the mscale factor is its own code's (transformers'
    DeepseekV2Attention leaves it out)."""
    H, eps = cfg["num_attention_heads"], cfg["rms_norm_eps"]
    dn, dr, dv, rank = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    B, T, _ = h.shape
    attn = pre + "self_attn."
    if cfg.get("q_lora_rank"):
        q = F.linear(ref.rms_norm(F.linear(h, p[attn + "q_a_proj.weight"]), p[attn + "q_a_layernorm.weight"], eps),
                     p[attn + "q_b_proj.weight"])
    else:
        q = F.linear(h, p[attn + "q_proj.weight"])
    q_pass, q_rot = q.view(B, T, H, dn + dr).transpose(1, 2).split([dn, dr], dim=-1)
    k_pass, k_rot = F.linear(h, p[attn + "kv_a_proj_with_mqa.weight"]).split([rank, dr], dim=-1)
    kv = F.linear(ref.rms_norm(k_pass, p[attn + "kv_a_layernorm.weight"], eps), p[attn + "kv_b_proj.weight"])
    k_pass, v = kv.view(B, T, H, dn + dv).transpose(1, 2).split([dn, dv], dim=-1)
    k_rot = k_rot.view(B, 1, T, dr)
    inv_freq, attention_factor = hf_rope_parameters(cfg, dr, T)
    freqs = torch.outer(torch.arange(T).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * attention_factor)[None, None], (emb.sin() * attention_factor)[None, None]

    def turn(x):
        if cfg.get("rope_interleave", True):
            x = x.view(*x.shape[:-1], dr // 2, 2).transpose(-1, -2).reshape(x.shape)
        return x * cos + torch.cat((-x[..., dr // 2:], x[..., :dr // 2]), dim=-1) * sin
    q_rot, k_rot = turn(q_rot), turn(k_rot)
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot.expand(B, H, T, dr)), dim=-1)
    scale = (dn + dr) ** -0.5
    scaling = cfg.get("rope_scaling") or {}
    if scaling.get("mscale_all_dim"):
        scale *= get_mscale(scaling["factor"], scaling["mscale_all_dim"]) ** 2
    probs = torch.softmax(query @ key.transpose(2, 3) * scale + mask, dim=-1)
    return (probs @ v).transpose(1, 2).reshape(B, T, H * dv)


def rotates(cfg, layer):
    """Whether `layer` turns the rotary embedding: not a SmolLM3 NoPE layer (no_rope_layers' 0s, else
    every no_rope_layer_interval-th, as SmolLM3Config derives them), nor any Granite 4.0 layer without
    position_embedding_type "rope", nor an Exaone 4 full-attention layer where a window is given (its global
    NoPE: Exaone4Attention turns the embedding where sliding_window is None or the layer slides)."""
    if cfg["model_type"] == "exaone4":
        return cfg.get("sliding_window", 4096) is None or sliding_window_of(cfg, layer) is not None
    if cfg["model_type"] == "granitemoehybrid":  # GraniteMoeHybridModel: rotary in every layer, or none
        return cfg.get("position_embedding_type") == "rope"
    if cfg["model_type"] != "smollm3":
        return True
    if cfg.get("no_rope_layers") is not None:
        return cfg["no_rope_layers"][layer] != 0
    return (layer + 1) % cfg.get("no_rope_layer_interval", 4) != 0


def padding_id(cfg):
    """The token transformers' nn.Embedding(vocab, hidden, padding_idx) leaves out of the embedding's
    gradient: pad_token_id, or its config class's default (Phi3Config's 32000, Gemma3TextConfig's 0,
    SmolLM3Config's 128004, Olmo2Config's and Olmo3Config's 1, Gemma2Config's, GemmaConfig's, Ernie4_5Config's and
    Ernie4_5_MoeConfig's 0); None for GPT-2, whose embedding has none."""
    if cfg["model_type"] == "gpt2":
        return None
    defaults = {"glm4": 151329,
                "phi3": 32000, "gemma3_text": 0, "smollm3": 128004, "olmo2": 1, "olmo3": 1, "olmoe": 1, "gemma2": 0, "gemma": 0,
                "ernie4_5": 0, "ernie4_5_moe": 0}
    return cfg.get("pad_token_id", defaults.get(cfg["model_type"]))


def embed_tokens(p, cfg, tokens):
    return F.embedding(tokens, p["model.embed_tokens.weight"], padding_idx=padding_id(cfg))


def softcap(x, cap):
    """Gemma 2's softcapping as transformers writes it: x / cap, tanh, times cap (None: x)."""
    return x if cap is None else torch.tanh(x / cap) * cap


def sandwiched_gemma(cfg):
    """Gemma 2's and 3's norms after each sublayer too (Gemma 1's before each alone, as Llama's)."""
    return cfg["model_type"] in ("gemma2", "gemma3_text")


def gemma_logits(p, cfg, tokens, score_head=False):
    """Logits as transformers' Gemma3ForCausalLM, Gemma2ForCausalLM and GemmaForCausalLM compute them
    in f32 (eager attention): GemmaRMSNorm's x / rms * (1 + weight), the embedding times sqrt(hidden)
    (an f32 tensor), Gemma 3's q and k normed per head, its sliding layers' rotary embedding of
    rope_local_base_freq unscaled and the others' of rope_theta with rope_scaling (Gemma 1's and 2's
    one rotary embedding everywhere), the scores times query_pre_attn_scalar^-1/2 (Gemma 1's
    head_dim^-1/2) and softcapped (attn_logit_softcapping, before the mask), Gemma 2's and 3's norms
    after the attention and around the MLP, GELU's tanh form of the gate (Gemma 1's too, whatever its
    legacy hidden_act says: transformers 4.39-4.47's reading), the logits softcapped (final_logit_softcapping) unless lm_head.weight stands
    for a reward model's score head (`score_head`: Gemma2ForSequenceClassification caps no score)."""
    H, KV, C = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, L = cfg["head_dim"], cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    B, T = tokens.shape

    def rotary(config):
        inv_freq, attention_factor = hf_rope_parameters(config, D)
        emb = torch.outer(torch.arange(T).float(), inv_freq).repeat(1, 2)
        return (emb.cos() * attention_factor)[None, None], (emb.sin() * attention_factor)[None, None]
    rotary_global = rotary(cfg)
    gemma3 = cfg["model_type"] == "gemma3_text"  # its sliding layers' own rotary base and its q/k norms
    sandwiched = sandwiched_gemma(cfg)
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if sandwiched else D ** -0.5
    rotary_local = rotary(dict(cfg, rope_theta=cfg["rope_local_base_freq"], rope_scaling=None)) \
        if gemma3 else rotary_global

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., :D // 2]), dim=-1)

    def rms_norm(x, w):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w)

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))

    x = embed_tokens(p, cfg, tokens) * torch.tensor(C ** 0.5)
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        window = sliding_window_of(cfg, l)
        cos, sin = rotary_local if window else rotary_global
        h = rms_norm(x, p[pre + "input_layernorm.weight"])
        q = linear(h, pre + "self_attn.q_proj").view(B, T, H, D)
        k = linear(h, pre + "self_attn.k_proj").view(B, T, KV, D)
        if gemma3:
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = linear(h, pre + "self_attn.v_proj").view(B, T, KV, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)  # repeat_kv
        v = v[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
        scores = softcap((q @ k.transpose(2, 3)) * scale, cfg.get("attn_logit_softcapping")) + mask
        if window:
            scores = scores + torch.full((T, T), float("-inf")).tril(-window)
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, H * D)
        a = linear(o, pre + "self_attn.o_proj")
        x = x + (rms_norm(a, p[pre + "post_attention_layernorm.weight"]) if sandwiched else a)
        h = rms_norm(x, p[pre + ("pre_feedforward_layernorm" if sandwiched else "post_attention_layernorm") + ".weight"])
        m = linear(F.gelu(linear(h, pre + "mlp.gate_proj"), approximate="tanh") * linear(h, pre + "mlp.up_proj"),
                   pre + "mlp.down_proj")
        x = x + (rms_norm(m, p[pre + "post_feedforward_layernorm.weight"]) if sandwiched else m)
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    logits = F.linear(rms_norm(x, p["model.norm.weight"]), head)
    return logits if score_head else softcap(logits, cfg.get("final_logit_softcapping"))


def hf_logits(p, cfg, tokens, score_head=False):
    """Logits as transformers' LlamaForCausalLM / Qwen2ForCausalLM / Qwen3ForCausalLM / GraniteForCausalLM
    compute them (eager attention; Qwen3's q_norm and k_norm on each head before the rotary embedding;
    Granite's, GraniteMoE's and Granite 4.0's multipliers; Ernie 4.5's interleaved rotary pairs; OLMo 2's norms after each sublayer alone and q/k norms over the whole
    projections, OLMoE's same q/k norms in Llama's layers, OLMo 3's as OLMo 2's with its sliding layers' rotary
    embedding unscaled, GLM-4's norms before and after each sublayer and its interleaved pairs over half of each
    head, Exaone 4's as OLMo 2's with q/k norms per head and no rotary embedding on its full-attention layers);
    Gemma's, Gemma 2's and 3's by gemma_logits. `score_head`: lm_head.weight stands for a
    reward model's score head, which Granite's logits_scaling leaves as it is (transformers' classifier)."""
    if cfg["model_type"] in GEMMAS:
        return gemma_logits(p, cfg, tokens, score_head)
    H, KV, C = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, L = cfg.get("head_dim") or C // H, cfg["rms_norm_eps"], cfg["num_hidden_layers"]
    B, T = tokens.shape

    def rope_tables(config):
        inv_freq, attention_factor = hf_rope_parameters(config, D, T)
        freqs = torch.outer(torch.arange(T).float(), inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * attention_factor)[None, None], (emb.sin() * attention_factor)[None, None]
    full_tables = rope_tables(cfg)
    # OLMo 3's sliding layers: the same base unscaled (transformers 4.57's Olmo3Model.rotary_embs,
    # its "sliding_attention" embedding of rope_type "default"); the others' one embedding for all.
    sliding_tables = rope_tables(dict(cfg, rope_scaling=None)) if cfg["model_type"] == "olmo3" else full_tables
    R = full_tables[0].shape[-1]  # the rotated part of each head (Phi-3's partial_rotary_factor), the rest passing

    def rotate_half(x):
        return torch.cat((-x[..., R // 2:], x[..., :R // 2]), dim=-1)

    def rotary(x, tables):
        cos, sin = tables
        turned, passing = x[..., :R], x[..., R:]
        if cfg["model_type"] in ("ernie4_5", "ernie4_5_moe", "glm4"):  # GLM's rotate_half: pairs 2i and 2i + 1
            c, s = (t[..., :R // 2].repeat_interleave(2, dim=-1) for t in (cos, sin))
            turned = turned * c + torch.stack((-turned[..., 1::2], turned[..., 0::2]), dim=-1).flatten(-2) * s
            return torch.cat((turned, passing), dim=-1)
        return torch.cat((turned * cos + rotate_half(turned) * sin, passing), dim=-1)

    def rms_norm(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x, name):
        return F.linear(x, p[name + ".weight"], p.get(name + ".bias"))

    def attention(l, pre, h):
        """Layer l's attention before o_proj (B, T, H x D), as LlamaAttention and its kin compute it."""
        if pre + "self_attn.qkv_proj.weight" in p:  # Phi-3's, split as its Phi3Attention does
            q, k, v = linear(h, pre + "self_attn.qkv_proj").split([H * D, KV * D, KV * D], dim=-1)
        else:
            q, k, v = (linear(h, pre + f"self_attn.{x}_proj") for x in "qkv")
        if whole_qk_norm:  # Olmo2Attention, OlmoeAttention: q_norm and k_norm over the whole projections
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.view(B, T, H, D), k.view(B, T, KV, D)
        if pre + "self_attn.q_norm.weight" in p and not whole_qk_norm:
            q, k = rms_norm(q, p[pre + "self_attn.q_norm.weight"]), rms_norm(k, p[pre + "self_attn.k_norm.weight"])
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(B, T, KV, D).transpose(1, 2)
        if rotates(cfg, l):
            tables = sliding_tables if sliding_window_of(cfg, l) else full_tables
            q, k = rotary(q, tables), rotary(k, tables)
        k = k[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)  # repeat_kv
        v = v[:, :, None].expand(B, KV, H // KV, T, D).reshape(B, H, T, D)
        scores = (q @ k.transpose(2, 3) * multiplier("attention_multiplier") if granite
                  else q @ k.transpose(2, 3) / math.sqrt(D)) + mask
        window = sliding_window_of(cfg, l)
        if window:  # transformers' sliding-window mask: key j of query i within i - window < j
            scores = scores + torch.full((T, T), float("-inf")).tril(-window)
        probs = ref.softmax_with_sinks(scores, p.get(pre + "self_attn.sinks"))  # gpt-oss's sinks, where it has them
        return (probs @ v).transpose(1, 2).reshape(B, T, H * D)

    x = embed_tokens(p, cfg, tokens)
    granite = cfg["model_type"] in ("granite", "granitemoe", "granitemoehybrid")  # their multipliers (modeling_granite*)
    multiplier = lambda key: cfg.get(key, 1.0) if granite else 1.0  # noqa: E731 (GraniteConfig's defaults 1)
    if granite:
        x = x * multiplier("embedding_multiplier")
    residual = multiplier("residual_multiplier")
    # Olmo2DecoderLayer, Exaone4DecoderLayer: no input norms, a norm after each sublayer
    olmo2 = cfg["model_type"] in ("olmo2", "olmo3", "exaone4")
    whole_qk_norm = cfg["model_type"] in ("olmo2", "olmo3", "olmoe")
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}."
        h = x if olmo2 else rms_norm(x, p[pre + "input_layernorm.weight"])
        if cfg["model_type"] in ("deepseek_v3", "deepseek_v2"):  # latent attention (then Llama's layer, GLM-4.5's experts)
            o = hf_deepseek_attention(p, cfg, pre, h, mask)
        else:
            o = attention(l, pre, h)
        if cfg["model_type"] == "glm4":  # Glm4DecoderLayer: a norm before and after each sublayer, Glm4MLP's chunks
            x = x + rms_norm(linear(o, pre + "self_attn.o_proj"), p[pre + "post_self_attn_layernorm.weight"])
            h = rms_norm(x, p[pre + "post_attention_layernorm.weight"])
            gate, up = linear(h, pre + "mlp.gate_up_proj").chunk(2, dim=-1)
            x = x + rms_norm(linear(up * F.silu(gate), pre + "mlp.down_proj"), p[pre + "post_mlp_layernorm.weight"])
            continue
        if olmo2:
            x = x + rms_norm(linear(o, pre + "self_attn.o_proj"), p[pre + "post_attention_layernorm.weight"])
            m = linear(F.silu(linear(x, pre + "mlp.gate_proj")) * linear(x, pre + "mlp.up_proj"), pre + "mlp.down_proj")
            x = x + rms_norm(m, p[pre + "post_feedforward_layernorm.weight"])
            continue
        x = x + linear(o, pre + "self_attn.o_proj") * residual
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"])
        if cfg["model_type"] == "gpt_oss":
            x = x + hf_gpt_oss_experts(p, cfg, pre, h)
            continue
        if cfg["model_type"] == "granitemoe":  # its experts' output times residual_multiplier, as attention's
            x = x + hf_granitemoe_experts(p, cfg, pre, h) * residual
            continue
        if moe_layer(cfg, l):
            deepseek = cfg["model_type"] in ("glm4_moe", "deepseek_v3", "deepseek_v2")
            ernie = cfg["model_type"] == "ernie4_5_moe"
            x = x + (hf_glm4_moe_experts if deepseek else hf_ernie45_moe_experts if ernie else hf_experts)(p, cfg, pre, h)
            continue
        if pre + "mlp.gate_up_proj.weight" in p:  # Phi-3's, chunked as its Phi3MLP does
            gate, up = linear(h, pre + "mlp.gate_up_proj").chunk(2, dim=-1)
        elif pre + "shared_mlp.input_linear.weight" in p:  # Granite 4.0's, chunked as its GraniteMoeSharedMLP does
            gate, up = linear(h, pre + "shared_mlp.input_linear").chunk(2, dim=-1)
            x = x + linear(F.silu(gate) * up, pre + "shared_mlp.output_linear") * residual
            continue
        else:
            gate, up = linear(h, pre + "mlp.gate_proj"), linear(h, pre + "mlp.up_proj")
        x = x + linear(F.silu(gate) * up, pre + "mlp.down_proj") * residual
    x = rms_norm(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return F.linear(x, head) / multiplier("logits_scaling") if granite and not score_head else F.linear(x, head)
