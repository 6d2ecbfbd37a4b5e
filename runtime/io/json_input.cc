#include "runtime/io/json_input.h"

#include "runtime/io/error.h"

namespace mt {
namespace {

template <typename Json>
Json parseChecked(std::string_view text, const std::string& what) {
  checkJsonDepth(text, what);
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 3: ..." without the tag.
    std::string reason = e.what();
    if (const size_t tag_end = reason.find("] "); reason.rfind("[json.exception", 0) == 0 && tag_end != std::string::npos)
      reason.erase(0, tag_end + 2);
    if (reason.size() > 300) reason = reason.substr(0, 300) + "...";  // "last read: '...'" quotes the bad token
    throw Error(what + " is not valid JSON: " + reason +
                " (NaN, Infinity and numbers beyond a double's range are not JSON either)");
  }
}

template <typename Json>
std::string brief(const Json& value) {
  constexpr size_t kMaxQuoted = 48;
  switch (value.type()) {
    case nlohmann::json::value_t::array:
      return "a list of " + std::to_string(value.size()) + (value.size() == 1 ? " item" : " items");
    case nlohmann::json::value_t::object:
      return "an object of " + std::to_string(value.size()) + (value.size() == 1 ? " key" : " keys");
    case nlohmann::json::value_t::string: {
      const std::string& text = value.template get_ref<const std::string&>();
      if (text.size() <= kMaxQuoted) return Json(text).dump();
      size_t cut = kMaxQuoted;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole characters
      return Json(text.substr(0, cut)).dump() + "... (" + std::to_string(text.size()) + " bytes)";
    }
    default:
      return value.dump();  // a number, a boolean, null: short
  }
}

}  // namespace

void checkJsonDepth(std::string_view text, const std::string& what) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character cannot end the string
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw Error(what + " nests lists and objects deeper than " + std::to_string(kMaxJsonDepth) +
                    " levels (at byte " + std::to_string(i) + "): no real file of this kind does; it is refused");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json parseJsonInput(std::string_view text, const std::string& what) {
  return parseChecked<nlohmann::json>(text, what);
}

nlohmann::ordered_json parseOrderedJsonInput(std::string_view text, const std::string& what) {
  return parseChecked<nlohmann::ordered_json>(text, what);
}

std::string jsonBrief(const nlohmann::json& value) { return brief(value); }
std::string jsonBrief(const nlohmann::ordered_json& value) { return brief(value); }

}  // namespace mt
