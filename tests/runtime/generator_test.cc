// The generator's loop without a model: a stand-in backend whose logits make the next token
// (the window's last token + the row + 1) mod vocab, so each window, each row's text and where a
// stop token ends a row can be checked exactly.
#include <gtest/gtest.h>

#include "runtime/io/error.h"
#include "runtime/generation/end_tokens.h"
#include "runtime/generation/generator.h"
#include "tests/runtime/expect_error.h"
#include "tests/runtime/scratch_path.h"

#include <filesystem>
#include <fstream>

namespace mt {
namespace {

constexpr int64_t kRows = 2, kWindow = 4, kVocab = 8;

// A host tensor of the stand-in plans.
void addHostTensor(plan::Plan& plan, const std::string& name, plan::HostRole role, plan::DType dtype,
                   const std::vector<int64_t>& shape) {
  auto* t = plan.add_host_tensors();
  t->set_name(name);
  t->set_role(role);
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
}

plan::Plan forwardOnlyPlan() {
  plan::Plan plan;
  addHostTensor(plan, "tokens", plan::ROLE_TOKENS, plan::DTYPE_I32, {kRows, kWindow});
  addHostTensor(plan, "logits", plan::ROLE_OUTPUT, plan::DTYPE_F32, {kRows, kWindow, kVocab});
  return plan;
}

// What every stand-in model's backend shares: no optimizer, no device, no timeline.
class StandInBackend : public Backend {
 public:
  explicit StandInBackend(HostStore& store) : store_(store) {}
  void applyPendingUpdate() override {}
  int64_t arenaBytes() const override { return 0; }
  const StepTimeline& lastTimeline() const override { return timeline_; }

 protected:
  HostStore& store_;
  StepTimeline timeline_;
};

// Greedy draws of at most `max_tokens` each.
GenerationOptions greedy(int64_t max_tokens) {
  GenerationOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = max_tokens;
  return options;
}

class NextTokenBackend : public StandInBackend {
 public:
  using StandInBackend::StandInBackend;
  std::string name() const override { return "next-token"; }
  StepResult runStep(const StepOptions&) override {
    const int32_t* tokens = store_.i32(store_.tokens());
    float* logits = store_.f32(store_.output("logits"));
    windows.emplace_back(tokens, tokens + kRows * kWindow);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t t = 0; t < kWindow; ++t)
        for (int64_t v = 0; v < kVocab; ++v)
          logits[(r * kWindow + t) * kVocab + v] = v == (tokens[r * kWindow + t] + r + 1) % kVocab ? 5.0f : 0.0f;
    return {};
  }
  std::vector<std::vector<int32_t>> windows;  // the tokens of each run
};

TEST(Generator, SlidesTheWindowAndStopsEachRowAtTheStopToken) {
  const plan::Plan plan = forwardOnlyPlan();
  HostStore store(plan);
  NextTokenBackend backend(store);
  Generator generator(plan, store, backend);
  GenerationOptions options = greedy(6);
  std::vector<std::pair<int64_t, uint32_t>> seen;
  auto added = generator.generate({1, 2}, options, [&](int64_t r, uint32_t id) { seen.emplace_back(r, id); });
  // Row 0 counts up by one, row 1 by two (mod 8).
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3, 4, 5, 6, 7, 0}));
  EXPECT_EQ(added[1], (std::vector<uint32_t>{4, 6, 0, 2, 4, 6}));
  EXPECT_EQ(seen.size(), 12u);
  // The first window: the prompt from position 0, zeros after it; later ones the last 4 tokens.
  EXPECT_EQ(backend.windows[0], (std::vector<int32_t>{1, 2, 0, 0, 1, 2, 0, 0}));
  EXPECT_EQ(backend.windows[4], (std::vector<int32_t>{3, 4, 5, 6, 4, 6, 0, 2}));

  // Stop token 6: row 0 stops after 3, 4, 5; row 1 right after 4; the loop ends when both have.
  backend.windows.clear();
  options.stop_tokens = {6};
  added = generator.generate({1, 2}, options);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(added[1], (std::vector<uint32_t>{4}));
  EXPECT_EQ(backend.windows.size(), 4u);
  // Any of several end tokens ends a row (a chat model's turn end beside its end-of-text).
  options.stop_tokens = {7, 4};
  added = generator.generate({1, 2}, options);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3}));
  EXPECT_EQ(added[1], (std::vector<uint32_t>{}));

  EXPECT_THROW(generator.generate({}, options), Error);
  EXPECT_THROW(generator.generate({9}, options), Error);  // past the vocabulary
}

// Every prompt's new tokens from generateAll, by prompt.
std::vector<std::vector<uint32_t>> generateEach(Generator& generator, const std::vector<std::vector<uint32_t>>& prompts,
                                                const GenerationOptions& options) {
  std::vector<std::vector<uint32_t>> added(prompts.size());
  generator.generateAll(prompts, options, [&](size_t i, std::vector<uint32_t> tokens) { added[i] = std::move(tokens); });
  return added;
}

// generateAll on a window plan: each row continues its own prompt (row 1 from 5 by twos), and a
// row without a prompt idles (its window zeros).
TEST(Generator, ContinuesEachRowsOwnPrompt) {
  const plan::Plan plan = forwardOnlyPlan();
  HostStore store(plan);
  NextTokenBackend backend(store);
  Generator generator(plan, store, backend);
  GenerationOptions options = greedy(3);
  auto added = generateEach(generator, {{1, 2}, {5}}, options);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(added[1], (std::vector<uint32_t>{7, 1, 3}));
  EXPECT_EQ(backend.windows[0], (std::vector<int32_t>{1, 2, 0, 0, 5, 0, 0, 0}));
  added = generateEach(generator, {{1, 2}}, options);
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_THROW(generateEach(generator, {{1}, {}}, options), Error);
  // More prompts than rows: a row whose prompt ends takes the next (row 1 counts by twos).
  options.stop_tokens = {4};
  added = generateEach(generator, {{1, 2}, {5}, {6}}, options);
  ASSERT_EQ(added.size(), 3u);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{3}));     // stops at 4: row 0 then takes {6}
  EXPECT_EQ(added[1], (std::vector<uint32_t>{7, 1, 3}));
  EXPECT_EQ(added[2], (std::vector<uint32_t>{7, 0, 1}));  // in row 0: counts by ones from 6
}

// A decode plan (tokens and positions (rows, 1), a cache of kWindow positions of one layer) whose
// stand-in model's next token is (token + position + 1) mod 16, and whose new key and value are
// the token itself: each row feeds its own prompt at its own positions, draws once its text is
// all fed, and rebuilds its own cache from its text's last half when full.
plan::Plan decodePlan() {
  plan::Plan plan;
  addHostTensor(plan, "tokens", plan::ROLE_TOKENS, plan::DTYPE_I32, {kRows, 1});
  addHostTensor(plan, kPositionsInput, plan::ROLE_INPUT, plan::DTYPE_I32, {kRows, 1});
  addHostTensor(plan, "cache.0.key", plan::ROLE_INPUT, plan::DTYPE_F32, {kRows, kWindow, 1});
  addHostTensor(plan, "cache.0.value", plan::ROLE_INPUT, plan::DTYPE_F32, {kRows, kWindow, 1});
  addHostTensor(plan, "logits", plan::ROLE_OUTPUT, plan::DTYPE_F32, {kRows, 1, 16});
  addHostTensor(plan, "new.0.key", plan::ROLE_OUTPUT, plan::DTYPE_F32, {kRows, 1, 1});
  addHostTensor(plan, "new.0.value", plan::ROLE_OUTPUT, plan::DTYPE_F32, {kRows, 1, 1});
  return plan;
}

class DecodeBackend : public StandInBackend {
 public:
  using StandInBackend::StandInBackend;
  std::string name() const override { return "decode"; }
  StepResult runStep(const StepOptions&) override {
    const int32_t* tokens = store_.i32(store_.tokens());
    const int32_t* positions = store_.i32(store_.input(kPositionsInput));
    runs.push_back({{tokens[0], tokens[1]}, {positions[0], positions[1]}});
    float* logits = store_.f32(store_.output("logits"));
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t v = 0; v < 16; ++v) logits[r * 16 + v] = v == (tokens[r] + positions[r] + 1) % 16 ? 5.0f : 0.0f;
      store_.f32(store_.output("new.0.key"))[r] = store_.f32(store_.output("new.0.value"))[r] = float(tokens[r]);
    }
    return {};
  }
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> runs;  // each run's tokens and positions
};

TEST(Generator, FeedsEachRowAtItsOwnPositionInADecodePlan) {
  const plan::Plan plan = decodePlan();
  HostStore store(plan);
  DecodeBackend backend(store);
  Generator generator(plan, store, backend);
  ASSERT_TRUE(generator.cached());
  const GenerationOptions options = greedy(4);
  const auto added = generateEach(generator, {{1, 2, 3}, {4}}, options);
  // Row 0: 1, 2, 3 at 0-2, draws 3+2+1 = 6; 6 at 3 draws 10; full: 6, 10 again at 0, 1 draws 12;
  // 12 at 2 draws 15. Row 1: 4 at 0 draws 5, 5 at 1 draws 7, 7 at 2 draws 10, 10 at 3 draws 14.
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0], (std::vector<uint32_t>{6, 10, 12, 15}));
  EXPECT_EQ(added[1], (std::vector<uint32_t>{5, 7, 10, 14}));
  using Run = std::pair<std::vector<int32_t>, std::vector<int32_t>>;
  EXPECT_EQ(backend.runs, (std::vector<Run>{{{1, 4}, {0, 0}}, {{2, 5}, {1, 1}}, {{3, 7}, {2, 2}}, {{6, 10}, {3, 3}},
                                            {{6, 0}, {0, 0}}, {{10, 0}, {1, 0}}, {{12, 0}, {2, 0}}}));
  // The cache holds each row's keys at their positions: row 0 after its rebuild 6, 10, 12.
  const float* keys = store.f32(store.input("cache.0.key"));
  EXPECT_EQ((std::vector<float>(keys, keys + 3)), (std::vector<float>{6, 10, 12}));
  // A prompt's tokens do not depend on the row it runs in or on the other prompts.
  EXPECT_EQ(generateEach(generator, {{4}}, options)[0], added[1]);
}

TEST(Generator, RefusesATrainingPlan) {
  plan::Plan plan = forwardOnlyPlan();
  addHostTensor(plan, "loss", plan::ROLE_LOSS, plan::DTYPE_F32, {1});
  HostStore store(plan);
  NextTokenBackend backend(store);
  EXPECT_THROW(Generator(plan, store, backend), Error);
}

// Issue 32: mtgen stopped at <|endoftext|>, not at the turn end a chat model was trained to
// emit. The model's end tokens are eos_token_id of its folder's generation_config.json (as
// transformers' generate() reads it), else of its config.json, with the tokenizer's end-of-text.
TEST(EndTokens, AreTheModelsOwnAsGenerateReadsThem) {
  plan::Plan plan = forwardOnlyPlan();
  plan.mutable_model()->set_hf_config(R"({"eos_token_id": [5, 7]})");
  EXPECT_EQ(modelEndTokens(plan, "", std::nullopt, kVocab), (std::vector<uint32_t>{5, 7}));
  EXPECT_EQ(modelEndTokens(plan, "", 7u, kVocab), (std::vector<uint32_t>{5, 7}));
  EXPECT_EQ(modelEndTokens(plan, "", 2u, kVocab), (std::vector<uint32_t>{5, 7, 2}));
  const std::string dir = test::scratchPath("model");
  std::filesystem::create_directories(dir);
  EXPECT_EQ(modelEndTokens(plan, dir, 2u, kVocab), (std::vector<uint32_t>{5, 7, 2}));  // no generation_config.json
  std::ofstream(dir + "/generation_config.json") << R"({"bos_token_id": 1, "eos_token_id": 6})";
  EXPECT_EQ(modelEndTokens(plan, dir, 2u, kVocab), (std::vector<uint32_t>{6, 2}));
  plan.mutable_model()->clear_hf_config();
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": null})";
  EXPECT_EQ(modelEndTokens(plan, dir, 2u, kVocab), (std::vector<uint32_t>{2}));  // a built-in model: its tokenizer's
  std::ofstream(dir + "/generation_config.json") << R"({"eos_token_id": [3, 99]})";
  test::expectError([&] { modelEndTokens(plan, dir, 2u, kVocab); },
                    "generation_config.json: eos_token_id holds 99, not a token id below the vocabulary's 8");
}

}  // namespace
}  // namespace mt
