#include "compiler/ModuleExpression.h"

#include <algorithm>
#include <bit>
#include <bitset>
#include <cctype>
#include <cstring>
#include <set>

#include "runtime/io/error.h"

namespace mt {

namespace {

using Node = ModuleExpression::Node;
constexpr size_t kMaxText = 512, kMaxName = 512;
constexpr int kMaxDepth = 16, kMaxCount = 256;

// Recursive descent over the expression (its depth bounded by kMaxDepth).
class Parser {
 public:
  Parser(const std::string& text, const std::string& what, std::vector<Node>& nodes)
      : t_(text), what_(what), nodes_(nodes) {}

  int parse() {
    const int root = alternation();
    if (i_ < t_.size()) fail("closes a group it never opened");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(what_ + " \"" + t_ + "\" " + why + " (at character " + std::to_string(i_ + 1) + ")");
  }
  int add(Node node) {
    nodes_.push_back(std::move(node));
    return static_cast<int>(nodes_.size()) - 1;
  }
  int alternation() {
    Node alt{Node::Kind::kAlternation};
    alt.children.push_back(sequence());
    while (i_ < t_.size() && t_[i_] == '|') ++i_, alt.children.push_back(sequence());
    return alt.children.size() == 1 ? alt.children[0] : add(std::move(alt));
  }
  int sequence() {
    Node seq{Node::Kind::kSequence};
    while (i_ < t_.size() && t_[i_] != '|' && t_[i_] != ')') seq.children.push_back(repeated(atom()));
    return add(std::move(seq));
  }
  // `node` under the repeat that follows it, if one does ({ not starting a count is a literal, as
  // in Python).
  int repeated(int node) {
    if (i_ >= t_.size()) return node;
    int min = 0, max = -1;
    const char c = t_[i_];
    if (c == '*') ++i_;
    else if (c == '+') ++i_, min = 1;
    else if (c == '?') ++i_, max = 1;
    else if (c != '{' || !counts(min, max)) return node;
    const Node::Kind kind = nodes_[node].kind;
    if (kind == Node::Kind::kStart || kind == Node::Kind::kEnd) fail("repeats an anchor, which is nothing to repeat");
    if (i_ < t_.size() && t_[i_] == '?') ++i_;  // lazy: the same full matches
    if (i_ < t_.size() && (t_[i_] == '*' || t_[i_] == '+' || t_[i_] == '?' || isCount())) fail("repeats a repeat");
    Node repeat{Node::Kind::kRepeat};
    repeat.children = {node};
    repeat.min = min, repeat.max = max;
    return add(std::move(repeat));
  }
  // Whether a count ({m}, {m,}, {,n}, {m,n}) starts at i_; i_ stays.
  bool isCount() {
    const size_t at = i_;
    int min = 0, max = 0;
    const bool found = i_ < t_.size() && t_[i_] == '{' && counts(min, max);
    i_ = at;
    return found;
  }
  // {m}, {m,}, {,n}, {m,n} at i_: true (i_ past it) with the counts, false where it is none.
  bool counts(int& min, int& max) {
    const size_t close = t_.find('}', i_);
    if (close == std::string::npos) return false;
    const std::string inner = t_.substr(i_ + 1, close - i_ - 1);
    if (inner.empty() || inner.find_first_not_of("0123456789,") != std::string::npos ||
        inner.find(',') != inner.rfind(','))
      return false;
    const size_t comma = inner.find(',');
    auto number = [&](std::string s, int fallback) {
      if (s.empty()) return fallback;
      s.erase(0, std::min(s.find_first_not_of('0'), s.size() - 1));  // leading zeros
      if (s.size() > 3 || std::stoi(s) > kMaxCount) fail("repeats more than 256 times");
      return std::stoi(s);
    };
    min = number(inner.substr(0, comma), 0);
    max = comma == std::string::npos ? min : number(inner.substr(comma + 1), -1);
    if (max != -1 && max < min) fail("has a repeat count whose maximum is below its minimum");
    i_ = close + 1;
    return true;
  }
  int atom() {
    const char c = t_[i_++];
    if (c == '(') return group();
    if (c == '[') return add({Node::Kind::kChars, bracket()});
    if (c == '\\') return escape(false);
    if (c == '^') return add({Node::Kind::kStart});
    if (c == '$') return add({Node::Kind::kEnd});
    if (c == '*' || c == '+' || c == '?' || (c == '{' && (--i_, isCount()))) fail("repeats nothing");
    if (c == '{') ++i_;  // a literal {
    Node node{Node::Kind::kChars};
    if (c == '.') node.chars.set().reset('\n');
    else node.chars.set(static_cast<unsigned char>(c));
    return add(std::move(node));
  }
  // (?P<name>: a Python identifier, each name once; i_ past the '>'.
  void namedGroup() {
    const size_t start = i_ + 3, close = t_.find('>', start);
    const std::string name = close == std::string::npos ? "" : t_.substr(start, close - start);
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos)
      fail("has a group name that is not an identifier");
    if (!names_.insert(name).second) fail("names two groups '" + name + "'");
    i_ = close + 1;
  }
  int group() {
    if (++depth_ > kMaxDepth) fail("nests groups deeper than 16");
    Node look{Node::Kind::kLookahead};
    bool lookahead = false;
    if (i_ < t_.size() && t_[i_] == '?') {
      const std::string kind = t_.substr(i_, 3);
      if (kind.starts_with("?:")) i_ += 2;
      else if (kind.starts_with("?=") || kind.starts_with("?!")) lookahead = true, look.negated = kind[1] == '!', i_ += 2;
      else if (kind == "?P<") namedGroup();
      else fail("has a group mtc does not read (a lookbehind, a back-reference, inline flags)");
    }
    const int inner = alternation();
    if (i_ >= t_.size() || t_[i_] != ')') fail("leaves a group open");
    ++i_, --depth_;
    if (!lookahead) return inner;
    look.children = {inner};
    return add(std::move(look));
  }
  // An escape at i_ (after the backslash): a class (\d \w \s and their negations), an assertion
  // (\A, \Z), or an escaped character.
  int escape(bool in_class) {
    if (i_ >= t_.size()) fail("ends in a lone backslash");
    const char c = t_[i_++];
    std::bitset<256> chars;
    auto range = [&](char from, char to) {
      for (int x = from; x <= to; ++x) chars.set(static_cast<unsigned char>(x));
    };
    switch (c) {
      case 'd': case 'D': range('0', '9'); break;
      case 'w': case 'W': range('a', 'z'), range('A', 'Z'), range('0', '9'), chars.set('_'); break;
      case 's': case 'S': for (char x : std::string(" \t\n\r\f\v")) chars.set(static_cast<unsigned char>(x)); break;
      case 'n': chars.set('\n'); break;
      case 't': chars.set('\t'); break;
      case 'A': case 'Z':
        if (in_class) fail("has \\" + std::string(1, c) + " inside a class");
        return add({c == 'A' ? Node::Kind::kStart : Node::Kind::kEnd});
      default:
        if (std::isalnum(static_cast<unsigned char>(c)))
          --i_, fail("has an escape mtc does not read (a back-reference, \\b, \\B, ...)");
        chars.set(static_cast<unsigned char>(c));
    }
    if (c == 'D' || c == 'W' || c == 'S') chars.flip();
    escaped_char_ = -1;
    if (chars.count() == 1 && !std::strchr("dDwWsS", c))
      for (int x = 0; x < 256; ++x)
        if (chars.test(x)) escaped_char_ = x;
    if (in_class) escaped_class_ = chars;
    return in_class ? -1 : add({Node::Kind::kChars, chars});
  }
  // A class after its '[': its characters (a leading ']' is one, as is a '-' at either end; a
  // range's ends may be escaped characters, not \d, \w or \s).
  std::bitset<256> bracket() {
    std::bitset<256> chars;
    const bool negated = i_ < t_.size() && t_[i_] == '^';
    i_ += negated;
    for (bool first = true; i_ < t_.size() && (first || t_[i_] != ']'); first = false) {
      const int from = classMember(chars);
      if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
        ++i_;
        std::bitset<256> ignored;
        const int to = classMember(ignored);
        if (from < 0 || to < 0 || to < from) fail("has a bad class range");
        for (int x = from; x <= to; ++x) chars.set(x);
      }
    }
    if (i_ >= t_.size()) fail("leaves a class [ open");
    ++i_;
    return negated ? ~chars : chars;
  }
  // One member of a class at i_, added to `chars`: the character it is (an escaped one too), or
  // -1 for \d, \w, \s and their negations.
  int classMember(std::bitset<256>& chars) {
    const unsigned char c = static_cast<unsigned char>(t_[i_++]);
    if (c != '\\') {
      chars.set(c);
      return c;
    }
    escape(true);
    chars |= escaped_class_;
    return escaped_char_;
  }

  const std::string& t_;
  const std::string& what_;
  std::vector<Node>& nodes_;
  size_t i_ = 0;
  int depth_ = 0;
  std::bitset<256> escaped_class_;
  int escaped_char_ = -1;  // the one character the last escape in a class stood for, or -1
  std::set<std::string> names_;
};

// Sets of positions in a name (0..n), as bits.
using Positions = std::vector<uint64_t>;

// ends(node, start): where `node` can end when it starts at `start`, each computed once.
class Matcher {
 public:
  Matcher(const std::vector<Node>& nodes, const std::string& name)
      : nodes_(nodes), s_(name), n_(name.size()), words_(n_ / 64 + 1),
        memo_(nodes.size() * (n_ + 1)), done_(nodes.size() * (n_ + 1), false) {}

  bool full(int root) { return has(ends(root, 0), n_); }

 private:
  static bool has(const Positions& p, size_t i) { return (p[i / 64] >> (i % 64)) & 1; }
  static void put(Positions& p, size_t i) { p[i / 64] |= uint64_t{1} << (i % 64); }
  bool empty(const Positions& p) const {
    for (uint64_t w : p)
      if (w) return false;
    return true;
  }
  // Where `node` can end from any position of `from`.
  Positions step(int node, const Positions& from) {
    Positions to(words_, 0);
    for (size_t w = 0; w < words_; ++w)
      for (uint64_t bits = from[w]; bits; bits &= bits - 1) {
        const Positions& e = ends(node, w * 64 + static_cast<size_t>(std::countr_zero(bits)));
        for (size_t v = 0; v < words_; ++v) to[v] |= e[v];
      }
    return to;
  }
  const Positions& ends(int index, size_t start) {
    const size_t key = static_cast<size_t>(index) * (n_ + 1) + start;
    if (!done_[key]) memo_[key] = compute(nodes_[index], start), done_[key] = true;
    return memo_[key];
  }
  Positions compute(const Node& node, size_t start) {
    Positions out(words_, 0), at(words_, 0);
    put(at, start);
    switch (node.kind) {
      case Node::Kind::kChars:
        if (start < n_ && node.chars.test(static_cast<unsigned char>(s_[start]))) put(out, start + 1);
        return out;
      case Node::Kind::kStart: return start == 0 ? at : out;
      case Node::Kind::kEnd: return start == n_ ? at : out;
      case Node::Kind::kLookahead: return empty(ends(node.children[0], start)) == node.negated ? at : out;
      case Node::Kind::kSequence:
        for (int child : node.children)
          if (at = step(child, at); empty(at)) break;
        return at;
      case Node::Kind::kAlternation:
        for (int child : node.children) {
          const Positions& e = ends(child, start);
          for (size_t w = 0; w < words_; ++w) out[w] |= e[w];
        }
        return out;
      case Node::Kind::kRepeat: return repeat(node, at);
    }
    return out;
  }
  // The repeat's ends: exactly `min` steps, then up to `max` more; a position reached again later
  // has no more steps left than the first time, so only new positions go on.
  Positions repeat(const Node& node, Positions at) {
    for (int k = 0; k < node.min && !empty(at); ++k) {
      Positions next = step(node.children[0], at);
      if (next == at) break;  // a step is a function of the set: it stays so
      at = std::move(next);
    }
    Positions out = at, frontier = at;
    for (int k = node.min; (node.max < 0 || k < node.max) && !empty(frontier); ++k) {
      Positions next = step(node.children[0], frontier);
      for (size_t w = 0; w < words_; ++w) next[w] &= ~out[w], out[w] |= next[w];
      frontier = std::move(next);
    }
    return out;
  }

  const std::vector<Node>& nodes_;
  const std::string& s_;
  const size_t n_, words_;
  std::vector<Positions> memo_;
  std::vector<bool> done_;
};

}  // namespace

ModuleExpression ModuleExpression::parse(const std::string& text, const std::string& what) {
  if (text.size() > kMaxText) throw Error(what + " is over 512 characters");
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80)
      throw Error(what + " \"" + text + "\" has a character outside ASCII (module names have none)");
  ModuleExpression expression;
  const int root = Parser(text, what, expression.nodes_).parse();
  // The root first: matching starts there.
  std::swap(expression.nodes_[0], expression.nodes_[root]);
  for (Node& node : expression.nodes_)
    for (int& child : node.children) child = child == root ? 0 : child == 0 ? root : child;
  return expression;
}

bool ModuleExpression::fullMatch(const std::string& name) const {
  return name.size() <= kMaxName && Matcher(nodes_, name).full(0);
}

}  // namespace mt
