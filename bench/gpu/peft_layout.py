"""Runs on the lent GPU machine (peft and transformers are there, not here): records how PEFT keeps
adapters on a mixture's expert stacks (target_parameters), which --export-peft does not write yet
and --lora-from refuses. A tiny gpt-oss (random weights, from a config) gets LoRA on both of its
stacks, gate_up_proj and down_proj, on one module; then its adapter folder's keys and shapes, the
config PEFT writes, whether the experts are is_transposed, and each saved pair's delta checked
against the layout docs/fine-tuning.md states (A's rows per expert, B's column k*E + e), are
printed. Nothing is asserted beyond that check: the lines are the reference for writing the form.
usage: python3 bench/gpu/peft_layout.py
"""
import json
import os
import tempfile

import torch


def main():
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, GptOssConfig

    torch.manual_seed(0)
    config = GptOssConfig(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=16, vocab_size=256, num_local_experts=4,
                          num_experts_per_tok=2, max_position_embeddings=64, layer_types=["full_attention"] * 2)
    model = AutoModelForCausalLM.from_config(config).float().eval()
    experts = model.model.layers[0].mlp.experts
    print(f"peft_layout experts: {type(experts).__name__}, is_transposed {getattr(experts, 'is_transposed', None)}, "
          f"gate_up_proj {tuple(experts.gate_up_proj.shape)}, down_proj {tuple(experts.down_proj.shape)}")
    rank, experts_n = 4, config.num_local_experts
    base = {n: p.detach().clone() for n, p in model.named_parameters()}  # before PEFT wraps the modules
    lora = LoraConfig(r=rank, lora_alpha=8, target_modules=[], init_lora_weights=False,
                      target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])
    peft_model = get_peft_model(model, lora)
    with tempfile.TemporaryDirectory() as folder:
        peft_model.save_pretrained(folder)
        with open(os.path.join(folder, "adapter_config.json")) as f:
            saved = json.load(f)
        tensors = load_file(os.path.join(folder, "adapter_model.safetensors"))
    print("peft_layout config: " + json.dumps({k: saved.get(k) for k in
                                                ("target_modules", "target_parameters", "r", "lora_alpha")}))
    for key in sorted(tensors):
        print(f"peft_layout key: {key} {tuple(tensors[key].shape)}")
    # Each saved pair against the documented layout: delta[e] = s * A_e^T B_e^T (in, out), A_e the
    # rows e*r .. e*r+r-1 of lora_A, B_e's column k the column k*E + e of lora_B.
    merged = peft_model.merge_and_unload()
    merged_params = dict(merged.named_parameters())
    scale = lora.lora_alpha / rank
    for stem in sorted({k.rsplit(".lora_", 1)[0] for k in tensors}):
        a, b = tensors[stem + ".lora_A.weight"], tensors[stem + ".lora_B.weight"]
        a_e = a.reshape(experts_n, rank, a.shape[-1])                        # (E, r, in)
        b_e = b.reshape(b.shape[0], rank, experts_n).permute(2, 0, 1)        # (E, out, r)
        delta = scale * torch.einsum("eri,eor->eio", a_e, b_e)
        matched = False
        for name in ("gate_up_proj", "down_proj"):
            param = stem.replace("base_model.model.", "").replace(".base_layer", "") + "." + name
            got = merged_params.get(param)
            if got is None or got.shape != delta.shape or param not in base:
                continue
            matched = True
            error = ((got - base[param]) - delta).abs().max().item() / max(delta.abs().max().item(), 1e-30)
            print(f"peft_layout delta: {stem} as {name}: relative {error:.2g} to the documented layout")
        if not matched:
            print(f"peft_layout delta: {stem}: no stack of its documented delta's shape {tuple(delta.shape)}")


if __name__ == "__main__":
    main()
