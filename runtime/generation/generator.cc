#include "runtime/generation/generator.h"

#include <algorithm>
#include <cstring>

#include "kernels/elementwise/elementwise.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

bool isFloatOutput(const plan::HostTensor& t) {
  return t.dtype() == plan::DTYPE_F32 || t.dtype() == plan::DTYPE_BF16;
}

std::vector<int64_t> shapeOf(const plan::HostTensor& t) { return {t.shape().begin(), t.shape().end()}; }

// A model evaluates without dropout, on the weights it had for the previous token: the device
// keeps a forward-only plan's weights from run to run.
StepOptions evaluationRun() {
  StepOptions run;
  run.random.training = false;
  run.weights_unchanged = true;
  return run;
}

}  // namespace

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
      logits.shape(1) != tokens.shape(1) || !isFloatOutput(logits))
    throw Error("the plan's logits are not (batch, seq, vocab) floats over its (batch, seq) tokens" + fix);
  batch_ = tokens.shape(0);
  seq_ = tokens.shape(1);
  vocab_ = logits.shape(2);
  positions_ = store.input(kPositionsInput);
  if (positions_ >= 0) findCache(plan);
}

void Generator::findCache(const plan::Plan& plan) {
  const std::string fix = ": compile it again with mtc --forward-only --kv-cache";
  const auto& positions = plan.host_tensors(positions_);
  if (seq_ != 1 || positions.dtype() != plan::DTYPE_I32 || shapeOf(positions) != std::vector<int64_t>{batch_, 1})
    throw Error("the plan's input \"positions\" is not one i32 position per sequence beside one token each: it is "
                "not a decode step" + fix);
  int inputs_named_cache = 0;
  for (const auto& t : plan.host_tensors())
    inputs_named_cache += t.role() == plan::ROLE_INPUT && t.name().rfind("cache.", 0) == 0;
  const auto& first = plan.host_tensors(std::max(store_.input("cache.0.key"), 0));
  seq_ = first.shape_size() == 3 ? first.shape(1) : 0;
  kv_width_ = first.shape_size() == 3 ? first.shape(2) : 0;
  // Layer by layer while layer L has a cache: its key and value, each with its new row.
  for (int layer = 0; store_.input("cache." + std::to_string(layer) + ".key") >= 0; ++layer) {
    for (const char* part : {".key", ".value"}) {
      const std::string name = std::to_string(layer) + part;
      const CachePair pair{store_.input("cache." + name), store_.output("new." + name)};
      if (pair.cache < 0 || pair.fresh < 0)
        throw Error("the decode plan lacks the input cache." + name + " or the output new." + name + fix);
      const auto& cache = plan.host_tensors(pair.cache);
      const auto& fresh = plan.host_tensors(pair.fresh);
      if (cache.dtype() != plan::DTYPE_F32 || shapeOf(cache) != std::vector<int64_t>{batch_, seq_, kv_width_} ||
          seq_ < 1 || !isFloatOutput(fresh) || shapeOf(fresh) != std::vector<int64_t>{batch_, 1, kv_width_})
        throw Error("the decode plan's cache." + name + " and new." + name +
                    " are not f32 (batch, positions, width) and (batch, 1, width) of one width" + fix);
      cache_.push_back(pair);
    }
  }
  if (cache_.empty() || static_cast<int>(cache_.size()) != inputs_named_cache)
    throw Error("the decode plan's cache inputs are not cache.L.key and cache.L.value for layers 0, 1, ..." + fix);
}

std::vector<int64_t> Generator::runWindow(const std::vector<std::vector<uint32_t>>& text) {
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
  backend_.runStep(evaluationRun());
  return last;
}

void Generator::runDecode(const std::vector<uint32_t>& ids, const std::vector<int64_t>& positions) {
  const bool inside = std::all_of(positions.begin(), positions.end(), [&](int64_t p) { return p >= 0 && p < seq_; });
  if (!cached() || !inside || static_cast<int64_t>(ids.size()) != batch_ ||
      static_cast<int64_t>(positions.size()) != batch_)
    throw Error("runDecode: a decode plan's run takes one token per row at a position inside the cache");
  int32_t* tokens = store_.i32(tokens_);
  int32_t* position_of = store_.i32(positions_);
  for (int64_t r = 0; r < batch_; ++r)
    tokens[r] = static_cast<int32_t>(ids[r]), position_of[r] = static_cast<int32_t>(positions[r]);
  backend_.runStep(evaluationRun());
  // The new token's key and value become row positions[r] of its sequence's cache.
  for (const CachePair& pair : cache_) {
    const bool bf16 = plan_.host_tensors(pair.fresh).dtype() == plan::DTYPE_BF16;
    for (int64_t r = 0; r < batch_; ++r) {
      float* row = store_.f32(pair.cache) + (r * seq_ + positions[r]) * kv_width_;
      if (bf16) widen_bf16(static_cast<const uint16_t*>(store_.data(pair.fresh)) + r * kv_width_, row, kv_width_);
      else std::memcpy(row, store_.f32(pair.fresh) + r * kv_width_, sizeof(float) * kv_width_);
    }
  }
}

void Generator::runDecode(const std::vector<uint32_t>& ids, int64_t position) {
  runDecode(ids, std::vector<int64_t>(static_cast<size_t>(batch_), position));
}

void Generator::readLogits(int64_t r, int64_t at, float* out) const {
  const int64_t offset = (r * plan_.host_tensors(logits_).shape(1) + at) * vocab_;
  if (plan_.host_tensors(logits_).dtype() == plan::DTYPE_BF16)
    widen_bf16(static_cast<const uint16_t*>(store_.data(logits_)) + offset, out, vocab_);
  else
    std::memcpy(out, store_.f32(logits_) + offset, sizeof(float) * vocab_);
}

void Generator::checkPrompt(const std::vector<uint32_t>& prompt, const std::string& where) const {
  const std::string at = where.empty() ? "" : where + ": ";
  if (prompt.empty()) throw Error(at + "the prompt holds no tokens: generation continues a text, give it one");
  const int64_t tokens = static_cast<int64_t>(prompt.size());
  if (tokens > seq_)
    throw Error(at + "the prompt is " + std::to_string(tokens) + " tokens, more than the plan's " +
                (cached() ? "key/value cache" : "window") + " of " + std::to_string(seq_) +
                " positions: the model would read only its last " + std::to_string(seq_) + ". " +
                (lengthen_ ? lengthen_(tokens)
                           : "Compile a forward-only plan with a --seq of at least the prompt and the reply (mtc "
                             "MODEL --forward-only --kv-cache --seq " +
                                 std::to_string(std::max<int64_t>(2 * seq_, tokens + 256)) + ")"));
  for (uint32_t id : prompt)
    if (id >= vocab_) throw Error(at + "prompt token " + std::to_string(id) + " is past the model's vocabulary of " +
                                  std::to_string(vocab_) + ": tokenise with the model's tokenizer");
}

std::vector<std::vector<uint32_t>> Generator::generate(const std::vector<uint32_t>& prompt,
                                                       const GenerationOptions& options,
                                                       const std::function<void(int64_t, uint32_t)>& on_token) {
  std::vector<std::vector<uint32_t>> added(static_cast<size_t>(batch_));
  run(std::vector<std::vector<uint32_t>>(static_cast<size_t>(batch_), prompt), options, on_token,
      [&](size_t i, std::vector<uint32_t> tokens) { added[i] = std::move(tokens); }, true);
  return added;
}

void Generator::generateAll(const std::vector<std::vector<uint32_t>>& prompts, const GenerationOptions& options,
                            const std::function<void(size_t, std::vector<uint32_t>)>& on_done) {
  if (prompts.empty()) throw Error("no prompt to continue: give at least one");
  run(prompts, options, {}, on_done, false);
}

// The rows are slots: each takes the next prompt not yet taken, and again when its prompt ends.
// Every run feeds each busy row one token: a decode plan the next token of the row's text at its
// own position (the cache holds text[base, base + fed) at positions 0 .. fed - 1, and is rebuilt
// from the text's last seq / 2 tokens when full), a window plan the row's whole window. A row whose
// text has all been run draws its next token, keyed by (its prompt's index, or 0 where
// `draws_by_prompt` is false: a one-row run's, and its draws so far); it ends at a stop token or at
// max_tokens. Idle rows are fed a 0 at position 0, never read.
void Generator::run(const std::vector<std::vector<uint32_t>>& prompts, const GenerationOptions& options,
                    const std::function<void(int64_t, uint32_t)>& on_token,
                    const std::function<void(size_t, std::vector<uint32_t>)>& on_done, bool draws_by_prompt) {
  for (const auto& prompt : prompts) checkPrompt(prompt);
  const size_t rows = static_cast<size_t>(batch_);
  constexpr size_t kIdle = SIZE_MAX;
  std::vector<size_t> prompt_of(rows, kIdle), base(rows, 0), fed(rows, 0);
  std::vector<std::vector<uint32_t>> text(rows, std::vector<uint32_t>{0}), added(rows);
  size_t next = 0;
  auto take = [&](size_t r) {  // row r's next prompt, if one is left
    prompt_of[r] = kIdle;
    if (next == prompts.size() || options.max_tokens <= 0) return;
    prompt_of[r] = next, text[r] = prompts[next++], added[r].clear(), base[r] = fed[r] = 0;
  };
  for (size_t r = 0; r < rows; ++r) take(r);
  auto busy = [&](size_t r) { return prompt_of[r] != kIdle; };
  std::vector<uint32_t> ids(rows, 0);
  std::vector<int64_t> positions(rows, 0), last(rows, 0);
  std::vector<float> row_logits(static_cast<size_t>(vocab_));
  while (std::any_of(prompt_of.begin(), prompt_of.end(), [&](size_t p) { return p != kIdle; })) {
    if (cached()) {
      for (size_t r = 0; r < rows; ++r) {
        ids[r] = 0, positions[r] = 0;
        if (!busy(r)) continue;
        if (int64_t(fed[r]) == seq_) base[r] = text[r].size() - std::max<size_t>(1, static_cast<size_t>(seq_ / 2)), fed[r] = 0;
        ids[r] = text[r][base[r] + fed[r]], positions[r] = static_cast<int64_t>(fed[r]);
      }
      runDecode(ids, positions);
      for (size_t r = 0; r < rows; ++r) fed[r] += busy(r);
    } else {
      last = runWindow(text);
    }
    for (size_t r = 0; r < rows; ++r) {
      if (!busy(r) || (cached() && base[r] + fed[r] < text[r].size())) continue;  // still feeding its text
      readLogits(static_cast<int64_t>(r), last[r], row_logits.data());
      // Each (prompt, draw) its own key, so rows differ and a run is reproducible.
      const uint64_t key = (uint64_t(draws_by_prompt ? prompt_of[r] : 0) << 32) | uint64_t(added[r].size());
      const uint32_t id = sampleToken(row_logits.data(), vocab_, options.sampling, key);
      const bool stop = std::find(options.stop_tokens.begin(), options.stop_tokens.end(), id) != options.stop_tokens.end();
      if (!stop) {
        text[r].push_back(id);
        added[r].push_back(id);
        if (on_token) on_token(static_cast<int64_t>(prompt_of[r]), id);
      }
      if (stop || static_cast<int64_t>(added[r].size()) >= options.max_tokens) {
        on_done(prompt_of[r], std::move(added[r]));
        take(r);  // run from the next run on (this loop has passed it)
      }
    }
  }
}

}  // namespace mt
