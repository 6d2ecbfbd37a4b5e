// Sampling text from a forward-only plan. Two kinds of plan:
// - a window plan (mtc --forward-only): input "tokens" (batch, seq), output "logits" (batch,
//   seq, vocab). Each new token runs the plan over the last `seq` tokens of the text (positions
//   after it are padding, which causal attention keeps out of the positions before them): a
//   whole window's forward per token.
// - a decode plan (mtc --forward-only --kv-cache, models/BuiltinModels.h ModelForm::kDecodeStep):
//   one new token per run at input "positions", attending over the keys and values of the tokens
//   before it, which this class keeps in the plan's inputs "cache.L.key"/"cache.L.value" (batch,
//   seq, kv width) and fills from its outputs "new.L.key"/"new.L.value". A token costs one
//   token's forward. The prompt is fed one token per run. When the text outgrows the cache,
//   the cache is rebuilt from the text's last seq / 2 tokens at positions from 0 (the window
//   plan slides by one token instead: the two agree until the text is seq tokens long).
// generate(): every row continues the same prompt with draws of its own; generateAll(): each row
// a prompt of its own, at its own positions, taking the next as it ends one (mtgen --chat-file).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/generation/sampling.h"

namespace mt {

struct GenerationOptions {
  SamplingOptions sampling;
  int64_t max_tokens = 100;             // new tokens per row
  std::vector<uint32_t> stop_tokens;    // a row ends when it draws one (the model's end tokens); kept out of its text
};

class Generator {
 public:
  // Throws mt::Error unless the plan is a forward-only window or decode plan with those tensors.
  // The store's weights must not change while the generator runs the plan: the backend keeps
  // them on the device after the first run (StepOptions::weights_unchanged).
  Generator(const plan::Plan& plan, HostStore& store, Backend& backend);

  int64_t rows() const { return batch_; }
  // The tokens a prediction sees at most: the window, or the cache's positions.
  int64_t window() const { return seq_; }
  int64_t vocab() const { return vocab_; }
  bool cached() const { return positions_ >= 0; }

  // Each row's new tokens after `prompt` (which must be non-empty, its ids inside the
  // vocabulary); `on_token(row, id)` sees each as it is drawn (the stop token excluded).
  std::vector<std::vector<uint32_t>> generate(const std::vector<uint32_t>& prompt, const GenerationOptions& options,
                                              const std::function<void(int64_t, uint32_t)>& on_token = {});
  // The new tokens after each of `prompts`, the rows as slots running together: a row whose
  // prompt ends takes the next (continuous batching: a long reply holds one row, not the others).
  // `on_done(i, tokens)` sees prompt i's new tokens as its row ends it, in the order they end.
  // Prompt i's draws are keyed as a one-row generate()'s, so its tokens do not depend on the row
  // it runs in or on the other prompts (but for rounding: the products' sums may be ordered
  // otherwise at another batch).
  void generateAll(const std::vector<std::vector<uint32_t>>& prompts, const GenerationOptions& options,
                   const std::function<void(size_t, std::vector<uint32_t>)>& on_done);

  // The steps generate() is made of (tests compare the two plans with them):
  // A window plan's run over each row's last `seq` tokens; returns each row's last position.
  std::vector<int64_t> runWindow(const std::vector<std::vector<uint32_t>>& text);
  // A decode plan's run on each row's token `ids[r]` at `positions[r]` (< window()), storing its
  // key and value in its cache's row positions[r]; rows [0, positions[r]) must hold the earlier
  // tokens'. The second form: every row at `position`.
  void runDecode(const std::vector<uint32_t>& ids, const std::vector<int64_t>& positions);
  void runDecode(const std::vector<uint32_t>& ids, int64_t position);
  // Row r's logits at token `at` of the last run (0 for a decode plan), as f32 in `out` (vocab()).
  void readLogits(int64_t r, int64_t at, float* out) const;

  // Throws mt::Error (its message after `where: ` where given) for a prompt the plan cannot
  // continue: empty, past its window or cache (saying how to lengthen it), or with an id past the
  // vocabulary. generate() and generateAll() check theirs; a caller may check its prompts first.
  void checkPrompt(const std::vector<uint32_t>& prompt, const std::string& where = "") const;
  // How checkPrompt says to lengthen the window for a prompt of `tokens` (a sentence); by default,
  // compiling a forward-only plan with a longer --seq (mtgen DIR: its --context instead).
  void setLengthenAdvice(std::function<std::string(int64_t tokens)> advice) { lengthen_ = std::move(advice); }

 private:
  // One layer's cache (inputs, batch x seq rows) and the new token's row of it (outputs).
  struct CachePair {
    int cache = -1, fresh = -1;
  };
  void findCache(const plan::Plan& plan);
  std::function<std::string(int64_t)> lengthen_;  // setLengthenAdvice's

  // generate() and generateAll(): the rows continue the prompts in turn; draws
  // keyed by the prompt's index (`draws_by_prompt`: generate()'s rows) or as a one-row run's.
  void run(const std::vector<std::vector<uint32_t>>& prompts, const GenerationOptions& options,
           const std::function<void(int64_t, uint32_t)>& on_token,
           const std::function<void(size_t, std::vector<uint32_t>)>& on_done, bool draws_by_prompt);

  const plan::Plan& plan_;
  HostStore& store_;
  Backend& backend_;
  int tokens_ = -1, logits_ = -1, positions_ = -1;
  std::vector<CachePair> cache_;  // keys and values of every layer (decode plans)
  int64_t batch_ = 0, seq_ = 0, vocab_ = 0, kv_width_ = 0;
};

}  // namespace mt
