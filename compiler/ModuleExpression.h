// A regular expression over module names, as PEFT's target_modules string is one (Python's
// re.fullmatch against a module's name). From a file, so hostile: parsed into a tree and matched
// by sets of end positions, each (node, start) computed once — time polynomial in the lengths of
// the expression and the name, never the exponential backtracking of "(a*)*b" under std::regex or
// Python's re. The syntax both share: literals, '.', classes ([a-z_], [^.], escaped ends), escapes
// (\d \w \s, their negations, escaped punctuation, \A \Z), groups ((...), (?:...), (?P<name>...)),
// lookaheads ((?=...), (?!...)), '|', the repeats * + ? {m} {m,} {,n} {m,n} (lazy or not: a full
// match is the same), ^ and $. ASCII only, as module names are (so \s and $ differ from Python's
// only on characters no name has).
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace mt {

class ModuleExpression {
 public:
  // Throws mt::Error naming what it cannot read (a back-reference, a lookbehind, inline flags, \b,
  // a non-ASCII character) or what Python's re refuses too (an unclosed group or class, a repeat
  // of nothing or of a repeat, a bad range or group name), in `what`'s words. At most 512
  // characters, groups nested at most 16 deep, repeat counts at most 256.
  static ModuleExpression parse(const std::string& text, const std::string& what);

  // Whether the whole of `name` matches (at most 512 characters; a longer one never does).
  bool fullMatch(const std::string& name) const;

  // A node of the parsed expression.
  struct Node {
    enum class Kind { kChars, kSequence, kAlternation, kRepeat, kLookahead, kStart, kEnd } kind;
    std::bitset<256> chars;     // kChars: the characters it matches
    std::vector<int> children;  // kSequence, kAlternation; kRepeat and kLookahead: one
    int min = 0, max = 0;       // kRepeat: the counts (max -1: unbounded)
    bool negated = false;       // kLookahead: (?!...)
  };

 private:
  ModuleExpression() = default;  // only parse() makes one
  std::vector<Node> nodes_;      // nodes_[0] is the root
};

}  // namespace mt
