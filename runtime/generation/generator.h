// Sampling text from a forward-only plan (mtc --forward-only): its input "tokens" (batch, seq)
// and its output "logits" (batch, seq, vocab). Every row continues the same prompt with draws of
// its own. Each new token runs the plan over the window of the last `seq` tokens (positions
// after the text are padding, which causal attention keeps out of the positions before them):
// there is no key/value cache yet, so a token costs a whole window's forward.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "runtime/backends/backend.h"
#include "runtime/host/host_store.h"
#include "runtime/generation/sampling.h"

namespace mt {

struct GenerationOptions {
  SamplingOptions sampling;
  int64_t max_tokens = 100;             // new tokens per row
  std::optional<uint32_t> stop_token;   // a row ends when it draws this (end-of-text); kept out of its text
};

class Generator {
 public:
  // Throws mt::Error unless the plan is forward-only with those tensors.
  Generator(const plan::Plan& plan, HostStore& store, Backend& backend);

  int64_t rows() const { return batch_; }
  int64_t window() const { return seq_; }
  int64_t vocab() const { return vocab_; }

  // Each row's new tokens after `prompt` (which must be non-empty, its ids inside the
  // vocabulary); `on_token(row, id)` sees each as it is drawn (the stop token excluded).
  std::vector<std::vector<uint32_t>> generate(const std::vector<uint32_t>& prompt, const GenerationOptions& options,
                                              const std::function<void(int64_t, uint32_t)>& on_token = {});

 private:
  const plan::Plan& plan_;
  HostStore& store_;
  Backend& backend_;
  int tokens_ = -1, logits_ = -1;
  int64_t batch_ = 0, seq_ = 0, vocab_ = 0;
};

}  // namespace mt
