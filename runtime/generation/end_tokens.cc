#include "runtime/generation/end_tokens.h"

#include <sys/stat.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "runtime/io/error.h"
#include "runtime/io/json_input.h"
#include "runtime/io/mapped_file.h"

namespace mt {
namespace {

// eos_token_id of `config` (`what` names it in messages), appended to `ids`; false without one.
bool appendEos(const nlohmann::json& config, const std::string& what, uint32_t vocab, std::vector<uint32_t>& ids) {
  if (!config.is_object() || !config.contains("eos_token_id") || config["eos_token_id"].is_null()) return false;
  const nlohmann::json& eos = config["eos_token_id"];
  const nlohmann::json list = eos.is_array() ? eos : nlohmann::json::array({eos});
  for (const nlohmann::json& id : list) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= vocab)
      throw Error(what + ": eos_token_id holds " + jsonBrief(id) + ", not a token id below the vocabulary's " +
                  std::to_string(vocab));
    if (std::find(ids.begin(), ids.end(), id.get<uint32_t>()) == ids.end()) ids.push_back(id.get<uint32_t>());
  }
  return true;
}

}  // namespace

std::vector<uint32_t> modelEndTokens(const plan::Plan& plan, const std::string& model_dir,
                                     std::optional<uint32_t> tokenizer_end, uint32_t vocab) {
  std::vector<uint32_t> ids;
  bool found = false;
  struct stat st {};
  const std::string generation = model_dir + "/generation_config.json";
  if (!model_dir.empty() && stat(generation.c_str(), &st) == 0)
    found = appendEos(parseJsonInput(readWholeFile(generation, "generation config", ""), generation), generation,
                      vocab, ids);
  if (!found && !plan.model().hf_config().empty())
    appendEos(parseJsonInput(plan.model().hf_config(), "the plan's Hugging Face config"),
              "the plan's Hugging Face config (config.json)", vocab, ids);
  if (tokenizer_end && std::find(ids.begin(), ids.end(), *tokenizer_end) == ids.end()) ids.push_back(*tokenizer_end);
  return ids;
}

}  // namespace mt
