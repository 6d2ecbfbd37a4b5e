// Where the built-in families' parameters live in Hugging Face checkpoints: one table for mtc's
// import (compiler/HuggingFace.cpp) and mtrun's export (runtime/training/huggingface.cc), in the
// plan library so that the compiler needs no runtime.
#pragma once
#include <cstdint>
#include <string>

namespace mt {

// The llama family's parameter `name` as Hugging Face checkpoints spell it ("layers.3.attn.q.weight"
// -> "model.layers.3.self_attn.q_proj.weight"), or "" if it has none.
std::string huggingFaceName(const std::string& name);

// Where a parameter of either family lives in a Hugging Face checkpoint: the tensor (GPT-2's
// body under `gpt2_body`: "transformer." as transformers saves GPT2LMHeadModel, "" in the
// original checkpoints), whether it is stored transposed (GPT-2's Conv1D: [in, out]), and which
// part of how many along the tensor's output axis (GPT-2's c_attn holds q, k and v side by
// side). `name` is empty where the parameter has no place. One table for mtc's import and
// mtrun's export.
struct HuggingFacePlace {
  std::string name;
  bool transposed = false;
  int64_t part = 0, parts = 1;
};
HuggingFacePlace huggingFacePlace(const std::string& param, const std::string& gpt2_body = "transformer.");

}  // namespace mt
