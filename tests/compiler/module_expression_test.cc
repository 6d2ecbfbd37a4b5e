// ModuleExpression (mtc --lora-from's target_modules as an expression): Python's re.fullmatch
// over module names — each expected value below is what re.fullmatch gives — and the refusals;
// the expressions that backtrack exponentially in std::regex and Python's re ("(a*)*b") answer
// in polynomial time.
#include <gtest/gtest.h>

#include <string>

#include "compiler/ModuleExpression.h"
#include "runtime/io/error.h"

namespace mt {
namespace {

bool full(const std::string& expression, const std::string& name) {
  return ModuleExpression::parse(expression, "target_modules").fullMatch(name);
}

TEST(ModuleExpression, MatchesAsPythonsFullmatch) {
  const std::string q = "model.layers.0.self_attn.q_proj", v = "model.layers.12.self_attn.v_proj";
  EXPECT_TRUE(full(R"(.*\.(q_proj|v_proj))", q));
  EXPECT_TRUE(full(R"(.*\.(q_proj|v_proj))", v));
  EXPECT_FALSE(full(R"(.*\.(q_proj|v_proj))", "model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(full("q_proj", q));  // the whole name, not a search
  EXPECT_TRUE(full(R"(^model\.layers\.\d+\.self_attn\.(q|v)_proj$)", v));
  EXPECT_FALSE(full(R"(model\.layers\.[0-9]\.self_attn\.q_proj)", "model.layers.12.self_attn.q_proj"));
  EXPECT_TRUE(full(R"(model\.layers\.[0-9]{1,2}\.self_attn\.q_proj)", "model.layers.12.self_attn.q_proj"));
  EXPECT_FALSE(full(R"(model\.layers\.[0-9]{3,}\.self_attn\.q_proj)", "model.layers.12.self_attn.q_proj"));
  EXPECT_TRUE(full(R"((?!.*vision).*\.q_proj)", q));  // a lookahead, as multimodal configs write
  EXPECT_FALSE(full(R"((?!.*vision).*\.q_proj)", "vision_tower.layers.0.q_proj"));
  EXPECT_TRUE(full(R"((?=model)\w+(\.\w+)+)", q));
  EXPECT_TRUE(full(R"([^.]+(?:\.[^.]+)*?\.q_proj)", q));  // lazy repeats: the same full matches
  EXPECT_TRUE(full(R"(model\.layers\.(?P<layer>\d+)\.self_attn\.q_proj)", q));
  EXPECT_TRUE(full(R"(a{2}b{,2}c{1,}[]x-]\D)", "aabbcc]z"));
  EXPECT_TRUE(full("a{x}", "a{x}"));  // not a repeat count: literal, as in Python
  EXPECT_TRUE(full("", ""));
  EXPECT_TRUE(full(R"([\.-9]+)", "5.0"));  // a range from an escaped character
  EXPECT_TRUE(full(R"([\]-a]+)", "]^a"));
  EXPECT_TRUE(full("a*{1,x", "aa{1,x"));     // not a count: literal
  EXPECT_TRUE(full("a{0002}", "aa"));
  EXPECT_TRUE(full("(?:^)*a", "a"));
}

TEST(ModuleExpression, ExponentialForBacktrackersIsQuickHere) {
  const std::string as(200, 'a');
  EXPECT_FALSE(full("(a*)*b", as));
  EXPECT_FALSE(full("(a|aa)*b", as));
  EXPECT_FALSE(full("(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)(a|a)b",
                    std::string(18, 'a')));
  EXPECT_FALSE(full(".*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*x", as));
  EXPECT_TRUE(full("(a*)*", as));
  std::string many;
  for (int i = 0; i < 50; ++i) many += "(.?){8}";
  EXPECT_FALSE(full(many + "x", std::string(300, 'a')));
}

TEST(ModuleExpression, RefusesWhatItDoesNotRead) {
  // What Python's re refuses too: the same errors; and what mtc does not read.
  for (const char* bad : {R"((a)\1)", "(?<=a)b", "(?i)q_proj", "(?P=x)", R"(\bq)", "(a", "a)", "[ab", "*a", "a**",
                          "a{3,2}", "a{999}", R"(a\)", "^*", "$?", "{2}", "a|{1}", "(?P<>a)", "(?P<1>a)",
                          "(?P<x>a)(?P<x>b)", R"([\d-z])", "[z-a]", "\xc3\xa9?q"}) {
    EXPECT_THROW(ModuleExpression::parse(bad, "target_modules"), Error) << bad;
  }
  EXPECT_THROW(ModuleExpression::parse(std::string(513, 'a'), "target_modules"), Error);
  std::string deep;
  for (int i = 0; i < 17; ++i) deep = "(" + deep + ")";
  EXPECT_THROW(ModuleExpression::parse(deep, "target_modules"), Error);
  try {
    ModuleExpression::parse("(a", "x/adapter_config.json: target_modules");
    ADD_FAILURE() << "an open group was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/adapter_config.json: target_modules \"(a\" leaves a group open"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mt
