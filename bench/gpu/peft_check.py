"""Runs on the lent GPU machine (peft and transformers are there, not here): each adapter folder
mtrun --export-peft wrote (bench/gpu/pack.sh: LoRA with rank and alpha patterns, DoRA, rsLoRA with
a module trained whole, a reward model's SEQ_CLS adapter, gpt-oss's experts as target_parameters,
Qwen3-MoE's as each expert's layers in target_modules) must load with peft's PeftModel on the
folder it was trained from with every tensor of the adapter file placed (none unexpected, none of
the adapter's own missing); the adapted model must compute the logits of the same run's --export-hf
folder (mtrun's merge), and peft's own merge_and_unload must give that folder's weights. A
multimodal Gemma 3 base (Gemma3ForConditionalGeneration) is loaded as that, its language model's
weights compared under Gemma3ForCausalLM's names (the merged folder's), the vision tower left out.
usage: python3 bench/gpu/peft_check.py BASE ADAPTER MERGED [BASE ADAPTER MERGED ...]
"""
import json
import os
import sys

import torch

LOGIT_TOLERANCE = 1e-4   # relative to the largest logit: f32 sums in another order
WEIGHT_TOLERANCE = 1e-5  # relative to the weight's largest element: W + s B A rounded once either way


def relative(got, want):
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def check(base_dir, adapter_dir, merged_dir):
    from peft import PeftModel
    from peft.utils import set_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
    with open(os.path.join(merged_dir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
        adapter_config = json.load(f)
    reward = config["architectures"][0].endswith("ForSequenceClassification")
    auto = AutoModelForSequenceClassification if reward else AutoModelForCausalLM
    extra = {"num_labels": 1} if reward else {}
    # A reward model scores each row at its last token before the padding: transformers refuses a
    # batch without a pad id, which a folder whose tokenizer named none does not give.
    pad = 0 if config.get("pad_token_id") is None else config["pad_token_id"]
    with open(os.path.join(base_dir, "config.json")) as f:
        multimodal = json.load(f).get("architectures") == ["Gemma3ForConditionalGeneration"]
    if multimodal:
        from transformers import Gemma3ForConditionalGeneration as auto_base
    else:
        auto_base = auto
    base = auto_base.from_pretrained(base_dir, attn_implementation="eager", **extra).float()
    if reward:
        base.config.pad_token_id = pad
    model = PeftModel.from_pretrained(base, adapter_dir).eval()
    # What peft placed: loading the file again through peft's own loader reports the keys.
    loaded = set_peft_model_state_dict(model, load_file(os.path.join(adapter_dir, "adapter_model.safetensors")))
    unexpected = list(loaded.unexpected_keys)
    missing = [k for k in loaded.missing_keys if "lora_" in k or "modules_to_save" in k]
    if unexpected or missing:
        return f"{adapter_dir}: peft left unexpected {unexpected[:4]} and missing {missing[:4]}"
    merged = auto.from_pretrained(merged_dir, attn_implementation="eager").float().eval()
    tokens = torch.arange(2 * 24).reshape(2, 24) * 7919 % config["vocab_size"]
    if reward:  # no padding in these rows: each scored at its last token
        merged.config.pad_token_id = pad
        tokens = torch.where(tokens == pad, (tokens + 1) % config["vocab_size"], tokens)
    with torch.no_grad():
        got, want = model(tokens).logits, merged(tokens).logits
    logit_error = relative(got, want)
    unloaded = model.merge_and_unload().state_dict()
    if multimodal:  # the language model's tensors under Gemma3ForCausalLM's names; the tower's left out
        unloaded = {("model." + k[len("model.language_model."):] if k.startswith("model.language_model.") else k): v
                    for k, v in unloaded.items() if k.startswith("model.language_model.") or k == "lm_head.weight"}
    weights = merged.state_dict()
    common = [k for k in weights if k in unloaded]
    if len(common) != len(weights):
        return f"{adapter_dir}: merge_and_unload lacks {sorted(set(weights) - set(unloaded))[:4]}"
    weight_error, worst = max((relative(unloaded[k].float(), weights[k].float()), k) for k in common)
    print(f"peft {os.path.basename(adapter_dir)}: {adapter_config.get('task_type')} r {adapter_config.get('r')}"
          f"{' dora' if adapter_config.get('use_dora') else ''}{' rslora' if adapter_config.get('use_rslora') else ''}"
          f", rank_pattern {adapter_config.get('rank_pattern') or {}}, target_parameters "
          f"{adapter_config.get('target_parameters')}, modules_to_save "
          f"{adapter_config.get('modules_to_save')}: every tensor placed; logits within {logit_error:.2g} (relative) "
          f"of mtrun's merged folder, merge_and_unload within {weight_error:.2g} ({worst})")
    if logit_error > LOGIT_TOLERANCE:
        return f"{adapter_dir}: logits differ from the merged folder's by {logit_error:.3g} > {LOGIT_TOLERANCE}"
    if weight_error > WEIGHT_TOLERANCE:
        return f"{adapter_dir}: merge_and_unload's {worst} differs by {weight_error:.3g} > {WEIGHT_TOLERANCE}"
    return None


def main(args):
    if not args or len(args) % 3:
        sys.exit(__doc__)
    failures = []
    for i in range(0, len(args), 3):
        try:
            problem = check(*args[i:i + 3])
        except Exception as error:  # one folder's failure must not hide the others'
            problem = f"{args[i + 1]}: {type(error).__name__}: {error}"
        if problem:
            failures.append(problem)
    for problem in failures:
        print("peft FAIL", problem)
    import peft
    import transformers
    # The versions decide layouts (PEFT 0.19.0 swapped a 3-D parameter's in and out) and whether
    # transformers 5's fused experts take transformers 4's per-expert adapters.
    print(f"peft: {len(args) // 3 - len(failures)} of {len(args) // 3} adapter folders load in peft as mtrun merged them "
          f"(peft {peft.__version__}, transformers {transformers.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
