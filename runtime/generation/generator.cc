#include "runtime/generation/generator.h"

#include <algorithm>
#include <cstring>

#include "kernels/elementwise/elementwise.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

namespace mt {

Generator::Generator(const plan::Plan& plan, HostStore& store, Backend& backend)
    : plan_(plan), store_(store), backend_(backend) {
  const std::string fix = ": compile the model with mtc --forward-only (tokens in, logits out)";
  if (isTrainingPlan(plan)) throw Error("the plan is a training step, not a forward-only plan" + fix);
  tokens_ = store.tokens();
  logits_ = store.output("logits");
  if (tokens_ < 0 || logits_ < 0) throw Error("the plan has no input \"tokens\" or no output \"logits\"" + fix);
  const auto& tokens = plan.host_tensors(tokens_);
  const auto& logits = plan.host_tensors(logits_);
  if (tokens.shape_size() != 2 || logits.shape_size() != 3 || logits.shape(0) != tokens.shape(0) ||
      logits.shape(1) != tokens.shape(1) ||
      (logits.dtype() != plan::DTYPE_F32 && logits.dtype() != plan::DTYPE_BF16))
    throw Error("the plan's logits are not (batch, seq, vocab) floats over its (batch, seq) tokens" + fix);
  batch_ = tokens.shape(0);
  seq_ = tokens.shape(1);
  vocab_ = logits.shape(2);
}

std::vector<std::vector<uint32_t>> Generator::generate(const std::vector<uint32_t>& prompt,
                                                       const GenerationOptions& options,
                                                       const std::function<void(int64_t, uint32_t)>& on_token) {
  if (prompt.empty()) throw Error("the prompt holds no tokens: generation continues a text, give it one");
  for (uint32_t id : prompt)
    if (id >= vocab_) throw Error("prompt token " + std::to_string(id) + " is past the model's vocabulary of " +
                                  std::to_string(vocab_) + ": tokenise with the model's tokenizer");
  std::vector<std::vector<uint32_t>> text(static_cast<size_t>(batch_), prompt), added(static_cast<size_t>(batch_));
  std::vector<bool> done(static_cast<size_t>(batch_), false);
  std::vector<float> row_logits(static_cast<size_t>(vocab_));
  const bool bf16 = plan_.host_tensors(logits_).dtype() == plan::DTYPE_BF16;
  for (int64_t step = 0; step < options.max_tokens; ++step) {
    // Each row's window: its last `seq` tokens from position 0, zeros after them.
    int32_t* tokens = store_.i32(tokens_);
    std::fill(tokens, tokens + batch_ * seq_, 0);
    std::vector<int64_t> last(static_cast<size_t>(batch_));
    for (int64_t r = 0; r < batch_; ++r) {
      const auto& t = text[r];
      const int64_t n = std::min<int64_t>(seq_, static_cast<int64_t>(t.size()));
      for (int64_t i = 0; i < n; ++i) tokens[r * seq_ + i] = static_cast<int32_t>(t[t.size() - n + i]);
      last[r] = n - 1;
    }
    StepOptions evaluation;
    evaluation.random.training = false;  // a model evaluates without dropout
    backend_.runStep(evaluation);
    bool any = false;
    for (int64_t r = 0; r < batch_; ++r) {
      if (done[r]) continue;
      const int64_t at = (r * seq_ + last[r]) * vocab_;
      if (bf16) {
        const uint16_t* src = static_cast<const uint16_t*>(store_.data(logits_)) + at;
        for (int64_t v = 0; v < vocab_; ++v) row_logits[v] = bf16Value(src[v]);
      } else {
        std::memcpy(row_logits.data(), store_.f32(logits_) + at, sizeof(float) * vocab_);
      }
      // Each (row, step) its own draw, so rows differ and a run is reproducible.
      const uint32_t id = sampleToken(row_logits.data(), vocab_, options.sampling, (uint64_t(r) << 32) | uint64_t(step));
      if (options.stop_token && id == *options.stop_token) {
        done[r] = true;
        continue;
      }
      text[r].push_back(id);
      added[r].push_back(id);
      if (on_token) on_token(r, id);
      any = true;
    }
    if (!any) break;
  }
  return added;
}

}  // namespace mt
