"""Offline preparation for the MegaTrain peer run (GPU machine, no internet).
Writes:
  OUT/qwen2.5-7b-random/config.json          public Qwen2.5-7B(-Instruct) architecture
  OUT/qwen2.5-7b-random/tokenizer.json (+config, chat template)  synthetic byte-level BPE (or WordLevel)
  [--save-weights] OUT/qwen2.5-7b-random/model-*.safetensors      random bf16 weights
  OUT/data/dataset_info.json + synth.json    alpaca-format synthetic samples (full length)
  OUT/megatrain_qwen7b_h200.yaml             copy of MegaTrain's qwen_7b_1gpu.yaml with local paths
Exits 1 if the tokenizer and chat template do not give train.py full-length rows (no other driver
stands in for MegaTrain's own train.py: its number is its code's or none).
"""
import argparse
import json
import os
import random
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--batch-size", type=int, default=158)
ap.add_argument("--seq-len", type=int, default=1024)
ap.add_argument("--num-steps", type=int, default=4)
ap.add_argument("--num-words", type=int, default=32000)
ap.add_argument("--save-weights", action="store_true")
ap.add_argument("--tiny", action="store_true", help="4-layer 512-wide Qwen2 for a 30 s smoke test")
a = ap.parse_args()
t0 = time.time()
mdir = os.path.join(a.out, "qwen2.5-7b-random")
ddir = os.path.join(a.out, "data")
os.makedirs(mdir, exist_ok=True)
os.makedirs(ddir, exist_ok=True)

# ------------------------------------------------------------------ config.json
QWEN25_7B = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": False,
    "use_sliding_window": False,
    "vocab_size": 152064,
}
if a.tiny:
    QWEN25_7B.update(hidden_size=512, intermediate_size=1024, num_hidden_layers=4, max_window_layers=4,
                     num_attention_heads=8, num_key_value_heads=2)
json.dump(QWEN25_7B, open(os.path.join(mdir, "config.json"), "w"), indent=2)

# ------------------------------------------------------------------ tokenizer
# Two candidates, the first whose rows pass the check at the end is kept. transformers 5 may rebuild
# a tokenizer.json as the model type's own class (Qwen2Tokenizer: byte-level BPE from the file's
# vocabulary and merges, its own pre-tokenizer) rather than load it as written: a WordLevel
# vocabulary then loses every word (session 40's first try kept the 4 special tokens of 256). A
# byte-level BPE holding all 256 byte symbols reads the same either way: one token a character.
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "[UNK]"]
TEMPLATE = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402


def byte_symbols():
    """GPT-2's printable stand-ins for the 256 bytes (what ByteLevel pre-tokenizers emit)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) for b in keep] + [chr(256 + i) for i in range(len(extra))]


def write_tokenizer(kind):
    if kind == "byte-level BPE":
        vocab = {t: i for i, t in enumerate(SPECIALS + byte_symbols())}
        tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
    else:
        words = ["system", "user", "assistant"] + [f"w{i}" for i in range(a.num_words)]
        vocab = {t: i for i, t in enumerate(SPECIALS + words)}
        tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tk.add_special_tokens(SPECIALS)
    tk.save(os.path.join(mdir, "tokenizer.json"))
    return vocab


tok_cfg = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "[UNK]",
    "bos_token": None, "model_max_length": 32768, "clean_up_tokenization_spaces": False,
    "chat_template": TEMPLATE,
}
json.dump(tok_cfg, open(os.path.join(mdir, "tokenizer_config.json"), "w"), indent=2)
json.dump({"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>", "unk_token": "[UNK]"},
          open(os.path.join(mdir, "special_tokens_map.json"), "w"))
open(os.path.join(mdir, "chat_template.jinja"), "w").write(TEMPLATE)

# ------------------------------------------------------------------ data (alpaca format)
rng = random.Random(0)
n = a.batch_size * (a.num_steps + 1)
resp_words = a.seq_len + 64          # longer than seq_len -> truncation -> no padding at all
rows = [{"instruction": " ".join(f"w{rng.randrange(a.num_words)}" for _ in range(16)),
         "input": "",
         "output": " ".join(f"w{rng.randrange(a.num_words)}" for _ in range(resp_words))}
        for _ in range(n)]
json.dump(rows, open(os.path.join(ddir, "synth.json"), "w"))
json.dump({"synth": {"file_name": "synth.json"}}, open(os.path.join(ddir, "dataset_info.json"), "w"), indent=2)

# ------------------------------------------------------------------ yaml (mirrors examples/sft/configs/qwen_7b_1gpu.yaml)
yaml_text = f"""# Derived from MegaTrain examples/sft/configs/qwen_7b_1gpu.yaml (the 272 TFLOPS single-GPU benchmark config).
# Changes: local random-weight model, synthetic local dataset, attn sdpa (flash-attn not installed).
model:
  name: "{mdir}"
  dtype: "bfloat16"
  device: 0
  attn_implementation: "sdpa"
  trust_remote_code: true

dataset:
  name: "synth"
  dataset_dir: "{ddir}"
  max_seq_len: {a.seq_len}
  num_workers: 4

training:
  batch_size: {a.batch_size}
  gradient_accumulation_steps: 1
  num_steps: {a.num_steps}
  learning_rate: 1.0e-5
  weight_decay: 0.01
  max_grad_norm: 1.0
  seed: 42

optimizer:
  type: "deepspeed_adam"
  beta1: 0.9
  beta2: 0.999
  eps: 1.0e-8

memory:
  checkpoint_interval: 4
  num_grad_slabs: 12

logging:
  log_interval: 1
  enable_timing: true
"""
open(os.path.join(a.out, "megatrain_qwen7b_h200.yaml"), "w").write(yaml_text)

# ------------------------------------------------------------------ verify the tokenizer path used by train.py
from transformers import AutoTokenizer  # noqa: E402

msgs = [{"role": "user", "content": rows[0]["instruction"]}, {"role": "assistant", "content": rows[0]["output"]}]
failures = []
for kind in ("byte-level BPE", "WordLevel"):
    vocab = write_tokenizer(kind)
    tok = AutoTokenizer.from_pretrained(mdir)
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
    enc = tok(text, max_length=a.seq_len, truncation=True, padding="max_length", return_tensors="pt",
              add_special_tokens=False)
    ids, am = enc["input_ids"][0], enc["attention_mask"][0]
    unk = int((ids == vocab["[UNK]"]).sum())
    if ids.numel() == a.seq_len and int(am.sum()) == a.seq_len and not unk and tok.pad_token is not None:
        print(f"[prep] tokenizer OK ({kind}, loaded as {type(tok).__name__}): {a.seq_len} real tokens, "
              f"first {tok.convert_ids_to_tokens(ids[:8].tolist())}")
        break
    failures.append(f"{kind} (loaded as {type(tok).__name__}): {ids.numel()} ids, {int(am.sum())} unmasked, {unk} "
                    f"unknown, pad token {tok.pad_token!r}, first {tok.convert_ids_to_tokens(ids[:8].tolist())}")
else:
    sys.exit(f"[prep] no tokenizer gives full rows of {a.seq_len} known tokens: " + "; ".join(failures))

# ------------------------------------------------------------------ optional: real safetensors checkpoint
if a.save_weights:
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import mt_patches
    m = mt_patches.build_random_model(mdir, torch.bfloat16, "sdpa")
    t1 = time.time()
    m.save_pretrained(mdir, safe_serialization=True, max_shard_size="5GB")
    json.dump(QWEN25_7B, open(os.path.join(mdir, "config.json"), "w"), indent=2)  # keep our exact config
    print(f"[prep] saved random bf16 weights in {time.time()-t1:.1f}s")
print(f"[prep] done in {time.time()-t0:.1f}s: model={mdir} data={ddir} samples={n}")
