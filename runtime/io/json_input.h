// JSON read from files, which are hostile until checked (config.json, tokenizer.json, weight
// indexes, instruction data, safetensors headers, plans' embedded configs). nlohmann's parser is
// iterative, but every walk over the parsed value — ours, and nlohmann's own dump() — recurses
// once per level: a document nested 50,000 deep would overflow the stack. So the depth is
// checked on the text before parsing, and a value quoted in a message is quoted in brief.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mt {

// Deeper than any real file of the kinds above (tokenizer.json's Sequences nest a few levels,
// config.json's rope_scaling two), shallow enough for any walk to recurse through.
inline constexpr int kMaxJsonDepth = 64;

// Throws mt::Error "<what>: nested deeper than 64 levels ..." when `text` opens more than
// kMaxJsonDepth arrays and objects inside each other (brackets inside strings do not count).
void checkJsonDepth(std::string_view text, const std::string& what);

// `text` parsed, its depth checked first. Throws mt::Error naming `what` (e.g. "config.json
// x/config.json") and the parser's place and reason for text that is not JSON (NaN, Infinity
// and numbers beyond a double's range included).
nlohmann::json parseJsonInput(std::string_view text, const std::string& what);
nlohmann::ordered_json parseOrderedJsonInput(std::string_view text, const std::string& what);

// `value` for a message, at most ~60 characters: a scalar as JSON (a long string cut short), a
// list or object by its size ("a list of 3 items"): never a dump of an unbounded value.
std::string jsonBrief(const nlohmann::json& value);
std::string jsonBrief(const nlohmann::ordered_json& value);

}  // namespace mt
