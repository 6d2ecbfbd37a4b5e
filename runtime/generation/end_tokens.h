// Where a model ends its text: the tokens transformers' generate() stops at (eos_token_id), so
// that a chat model trained to end its turn with <|im_end|> or <|eot_id|> stops there, not at
// <|endoftext|> after running on past its answer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/plan/plan_format.h"

namespace mt {

// The model's end tokens: eos_token_id (an id or a list) of `model_dir`'s generation_config.json
// where there is one (what generate() reads first), else of its config.json as the plan carries
// it (ModelInfo.hf_config), together with `tokenizer_end` (the tokenizer's end-of-text, where it
// has one); in that order, without repeats. Throws mt::Error naming the file for an id that is
// not a whole number below `vocab`. `model_dir` "" or without the file: the plan's config only.
std::vector<uint32_t> modelEndTokens(const plan::Plan& plan, const std::string& model_dir,
                                     std::optional<uint32_t> tokenizer_end, uint32_t vocab);

}  // namespace mt
