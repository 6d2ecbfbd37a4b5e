// mttok --chat, --preferences and --unpaired: instruction and preference data rendered with a chat
// template (the tokenizer folder's own, as transformers renders it, or a built-in one), each
// reply counted by the loss mask, examples cut to the length limits as TRL cuts them, and what
// that did summed up.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/chat_jinja.h"
#include "runtime/data/example_packing.h"
#include "runtime/data/preference_data.h"
#include "runtime/io/error.h"
#include "tools/mttok_options.h"

namespace mttok {
namespace {

// What shaping did to the examples, for the summary: each count with the first example it hit.
struct ShapingNote {
  int64_t count = 0;
  std::string first;
  void add(const std::string& where, int64_t n = 1) {
    if (n > 0 && count == 0) first = where;
    count += n;
  }
};

// Every example of the inputs rendered into parts: with the tokenizer folder's own chat template
// (Jinja2, as transformers renders it) unless --template names a built-in one or the folder has
// none; says which.
std::vector<std::vector<mt::ChatPart>> renderExamples(const Options& o, const mt::HfTokenizer& tokenizer,
                                                      const std::vector<mt::ChatExample>& examples,
                                                      const std::vector<std::string>& where) {
  const mt::ChosenChatTemplate chosen = mt::chooseChatTemplate(tokenizer, o.chat_template);
  // --ids: standard output holds the ids alone.
  std::fprintf(o.print_ids ? stderr : stdout, "mttok: chat template: %s\n", chosen.description.c_str());
  if (chosen.own) return mt::renderWithJinja(*chosen.own, tokenizer, examples, where);
  const mt::ChatTemplate chat_template = chosen.builtin;
  // A template whose markers the tokenizer lacks still renders, but its markers become plain text.
  const char* marker = mt::turnMarker(chat_template);
  if (!tokenizer.tokenId(marker))
    std::fprintf(stderr,
                 "mttok: warning: the tokenizer %s has no %s token: the template's markers become plain text, "
                 "which the model has not learnt as turns (name its own template with --template)\n",
                 tokenizer.path().c_str(), marker);
  std::vector<std::vector<mt::ChatPart>> rendered;
  for (size_t i = 0; i < examples.size(); ++i) {
    try {
      rendered.push_back(mt::renderExample(examples[i], chat_template));
    } catch (const mt::Error& e) {
      throw mt::Error(where[i] + ": " + e.what());
    }
  }
  return rendered;
}

// The examples' lengths in tokens (each to the next one's start, its end token included), for
// choosing a plan's --seq: the median, the 95th percentile and the longest, named.
void printLengths(const std::vector<int64_t>& starts, size_t total, const std::vector<std::string>& where,
                  Job job) {
  const bool pairs = inPairs(job);
  if (starts.empty()) return;
  std::vector<int64_t> lengths(starts.size());
  for (size_t e = 0; e < starts.size(); ++e)
    lengths[e] = (e + 1 < starts.size() ? starts[e + 1] : static_cast<int64_t>(total)) - starts[e];
  const size_t longest = static_cast<size_t>(std::max_element(lengths.begin(), lengths.end()) - lengths.begin());
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const size_t p95 = std::min(sorted.size() - 1, (sorted.size() * 95 + 99) / 100 - 1);
  const int64_t seq = std::max<int64_t>(lengths[longest] - 1, 1);  // a row holds --seq + 1 tokens
  std::printf("mttok: example lengths (tokens, the end token included): median %lld, 95%% at most %lld, longest "
              "%lld (%s); %s keeps every one whole with a plan's --seq of %lld or more\n",
              static_cast<long long>(sorted[sorted.size() / 2]), static_cast<long long>(sorted[p95]),
              static_cast<long long>(lengths[longest]), where[longest].c_str(),
              job == Job::Unpaired ? "a plan of mtc --objective kto"
              : pairs              ? "a plan of mtc --objective dpo"
                                   : "mtrun --rows examples",
              static_cast<long long>(seq));
  if (pairs) return;  // pairs are not packed
  // What padding that costs, and what packing them saves (in file order; a run's shuffles pack
  // about as many rows).
  std::vector<int64_t> slots(lengths.size());
  int64_t used = 0;
  for (size_t e = 0; e < lengths.size(); ++e) slots[e] = std::min(lengths[e], seq), used += slots[e];
  const auto padding = [&](size_t rows) { return 100.0 * (1.0 - double(used) / (double(rows) * double(seq))); };
  const size_t packed_rows = mt::nextFitRows(slots, seq).size();
  std::printf("mttok: at that --seq, one example per row is %.0f%% padding; mtrun --rows packed-examples (a plan of "
              "mtc --packed-examples: each example sees only itself) packs them into %zu rows instead of %zu, %.0f%% "
              "padding\n",
              padding(lengths.size()), packed_rows, lengths.size(), padding(packed_rows));
}

// The instruction data of the inputs, each example named where it is, and what reading them saw:
// examples with an empty reply, and with tools.
struct ChatInputs {
  std::vector<mt::ChatExample> examples;
  std::vector<std::string> where;
  ShapingNote empty_replies, with_tools;
  ShapingNote same_replies;  // --preferences: pairs whose chosen and rejected replies are one text
  std::vector<float> margins;  // --preferences: each pair's "margin", where the records give them
  ShapingNote with_margin, without_margin;
  std::vector<uint8_t> labels;  // --unpaired: each example's (1 desirable), one per pair of rows
  ShapingNote same_prompt_kl;   // --unpaired: KL rows that found no other prompt's completion
};
// Whether an example trains on an empty reply (white space only; not a reply of calls): any of
// its replies, or with --mask-history its last.
bool trainsOnEmptyReply(const mt::ChatExample& example, bool mask_history) {
  bool empty = false;
  for (const mt::ChatMessage& m : example.messages) {
    if (m.role != "assistant") continue;
    const bool blank = !m.holdsTools() && m.content.find_first_not_of(" \t\r\n") == std::string::npos;
    empty = mask_history ? blank : empty || blank;
  }
  return empty;
}

// KTO's examples, each followed by its KL row: its prompt with another prompt's completion
// (mt::klSource), as TRL's KTOTrainer pairs a batch's prompts with each other's completions; the
// labels one per example. The KL rows' completions were checked (empty, tools) as their own examples.
void addUnpaired(const Options& o, ChatInputs& in,
                 const std::function<void(const mt::ChatExample&, const std::string&)>& add) {
  std::vector<mt::LabelledExample> examples;
  std::vector<std::string> where;
  for (const auto& path : o.inputs)
    mt::forEachLabelledExample(path, readText(path), [&](const mt::LabelledExample& e, const std::string& at) {
      examples.push_back(e);
      where.push_back(at);
    });
  if (examples.size() < 2)
    throw mt::Error(fmt::format("--unpaired: {} example{}: KTO needs two or more (each example's KL row pairs its "
                                "prompt with another example's completion)",
                                examples.size(), examples.size() == 1 ? "" : "s"));
  for (size_t i = 0; i < examples.size(); ++i) {
    add(examples[i].example, where[i]);
    bool same_prompt = false;
    const size_t source = mt::klSource(examples, i, same_prompt);
    if (same_prompt) in.same_prompt_kl.add(where[i]);
    in.examples.push_back(mt::klExample(examples[i], examples[source]));
    in.where.push_back(where[i] + " (KL row, the completion of " + where[source] + ")");
    in.labels.push_back(examples[i].desirable);
  }
}

ChatInputs readChatInputs(const Options& o) {
  ChatInputs in;
  const bool last_reply = o.mask_history || inPairs(o.job);
  auto add = [&](const mt::ChatExample& example, const std::string& at) {
    if (trainsOnEmptyReply(example, last_reply)) in.empty_replies.add(at);
    if (example.usesTools()) in.with_tools.add(at);
    in.examples.push_back(example);
    in.where.push_back(at);
  };
  if (o.job == Job::Unpaired) {
    addUnpaired(o, in, add);
    return in;
  }
  for (const auto& path : o.inputs) {
    if (o.job == Job::Chat) {
      mt::forEachExample(path, readText(path), add);
      continue;
    }
    mt::forEachPreferencePair(path, readText(path), [&](const mt::PreferencePair& pair, const std::string& at) {
      if (pair.chosen.messages.back().content == pair.rejected.messages.back().content) in.same_replies.add(at);
      (pair.margin ? in.with_margin : in.without_margin).add(at);
      in.margins.push_back(pair.margin.value_or(0.0f));
      add(pair.chosen, at + " (chosen)");
      add(pair.rejected, at + " (rejected)");
    });
  }
  // A margin the loss reads for some pairs and not others would train them alike but differently.
  if (in.with_margin.count && in.without_margin.count)
    throw mt::Error(fmt::format("{} of the pairs give a \"margin\" ({} the first) and {} do not ({} the first): give "
                                "every pair one, or none",
                                in.with_margin.count, in.with_margin.first, in.without_margin.count,
                                in.without_margin.first));
  if (!in.with_margin.count) in.margins.clear();
  return in;
}

// The last counted stretch of a rendered example alone counted: its last reply (--mask-history).
void countLastReplyOnly(std::vector<mt::ChatPart>& parts) {
  bool last = true;
  for (auto part = parts.rbegin(); part != parts.rend(); ++part)
    if (part->counted) part->counted = last, last = false;
}

// The examples encoded one after another, each followed by the end-of-text token (not counted),
// and what shaping them did.
struct Encoded {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  std::vector<int64_t> starts;  // each example's first token: mtrun --rows examples, pairs
  ShapingNote truncated, nothing_left;
  // A reasoning the rendering does not hold: the template left it out (Qwen 3's keeps the reasoning
  // after the last user message only, gpt-oss's the last reply's thinking; the others render none).
  ShapingNote unrendered_reasoning;
  int64_t crossing_examples = 0;  // a token across a reply's edge
};

// One example's tokens and which of them count.
struct ExampleTokens {
  std::vector<uint32_t> ids;
  std::vector<uint8_t> counted;
  void cut(size_t at, size_t n) {
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + n));
    counted.erase(counted.begin() + static_cast<std::ptrdiff_t>(at),
                  counted.begin() + static_cast<std::ptrdiff_t>(at + n));
  }
  size_t firstCounted() const {
    return static_cast<size_t>(std::find(counted.begin(), counted.end(), 1) - counted.begin());
  }
};

// The length limits given, for the report of what they cut: "--max-length 1024 tokens, ...".
std::string lengthLimits(const Options& o) {
  std::string text;
  for (auto [flag, limit] : {std::pair{"--max-length", o.max_length}, {"--max-prompt-length", o.max_prompt_length},
                             {"--max-completion-length", o.max_completion_length}})
    if (limit > 0) text += fmt::format("{}{} {} tokens", text.empty() ? "" : ", ", flag, limit);
  return text;
}

// How many tokens of `length` (the end token added) are above --max-length.
size_t overMaxLength(const Options& o, size_t length) {
  return o.max_length > 0 && length + 1 > static_cast<size_t>(o.max_length)
             ? length + 1 - static_cast<size_t>(o.max_length)
             : size_t{0};
}

// A pair (--preferences) cut as TRL's DPOTrainer cuts one: its prompt (the tokens before either
// reply) to its last --max-prompt-length tokens, each reply to its first --max-completion-length;
// then, above --max-length, the prompt's beginning, the same tokens from both examples so that they
// keep one prompt, and where the prompt alone is not enough each reply's end. Returns which of
// the two examples was cut.
std::vector<bool> cutPair(const Options& o, std::vector<ExampleTokens>& pair) {
  const auto prompt = [&] { return std::min(pair[0].firstCounted(), pair[1].firstCounted()); };
  std::vector<bool> cut(pair.size(), false);
  if (o.max_prompt_length > 0 && prompt() > static_cast<size_t>(o.max_prompt_length)) {
    const size_t excess = prompt() - static_cast<size_t>(o.max_prompt_length);
    for (ExampleTokens& e : pair) e.cut(0, excess);
    cut.assign(pair.size(), true);
  }
  for (size_t k = 0; k < pair.size(); ++k) {
    const size_t reply = pair[k].ids.size() - prompt(), keep = static_cast<size_t>(o.max_completion_length);
    if (o.max_completion_length > 0 && reply > keep) pair[k].cut(prompt() + keep, reply - keep), cut[k] = true;
  }
  const size_t over = overMaxLength(o, std::max(pair[0].ids.size(), pair[1].ids.size()));
  const size_t prompt_cut = std::min(prompt(), over);
  for (size_t k = 0; k < pair.size(); ++k) {
    if (prompt_cut) pair[k].cut(0, prompt_cut), cut[k] = true;
    if (const size_t excess = overMaxLength(o, pair[k].ids.size()))
      pair[k].cut(pair[k].ids.size() - excess, excess), cut[k] = true;
  }
  return cut;
}

// `rendered` encoded, counted as the flags say, cut to --max-length tokens with the end token:
// what is cut is an example's end (the last replies), or with the last reply alone counted
// (--mask-history) its beginning (the earliest turns); a pair (--preferences) as cutPair does.
Encoded encodeExamples(const Options& o, mt::HfTokenizer& tokenizer, const ChatInputs& in,
                       const std::vector<std::vector<mt::ChatPart>>& rendered, uint32_t end) {
  const bool pairs = inPairs(o.job);
  const size_t group = pairs ? 2 : 1;
  Encoded out;
  for (size_t first = 0; first < rendered.size(); first += group) {
    std::vector<ExampleTokens> tokens(group);
    for (size_t k = 0; k < group; ++k) {
      const size_t e = first + k;
      out.unrendered_reasoning.add(in.where[e], static_cast<int64_t>(mt::reasoningLeftOut(in.examples[e].messages,
                                                                                         rendered[e])));
      out.crossing_examples += mt::appendExample(tokenizer, rendered[e], tokens[k].ids, tokens[k].counted) > 0;
      if (o.train_on_prompt) std::fill(tokens[k].counted.begin(), tokens[k].counted.end(), 1);
    }
    std::vector<bool> cut(group, false);
    if (pairs) {
      cut = cutPair(o, tokens);
    } else if (const size_t excess = overMaxLength(o, tokens[0].ids.size())) {
      tokens[0].cut(o.mask_history ? 0 : tokens[0].ids.size() - excess, excess);
      cut[0] = true;
    }
    for (size_t k = 0; k < group; ++k) {
      if (cut[k]) {
        out.truncated.add(in.where[first + k]);
        if (tokens[k].firstCounted() == tokens[k].counted.size()) out.nothing_left.add(in.where[first + k]);
      }
      out.starts.push_back(static_cast<int64_t>(out.ids.size()));
      out.ids.insert(out.ids.end(), tokens[k].ids.begin(), tokens[k].ids.end());
      out.counted.insert(out.counted.end(), tokens[k].counted.begin(), tokens[k].counted.end());
      out.ids.push_back(end);
      out.counted.push_back(0);
    }
  }
  return out;
}

// KTO's labels counted, and TRL's advice where they are out of balance: desirable_weight times the
// desirable examples within 1 to 4/3 of undesirable_weight times the undesirable ones.
void printLabelBalance(const std::vector<uint8_t>& labels) {
  const int64_t desirable = std::count(labels.begin(), labels.end(), uint8_t{1});
  const int64_t undesirable = static_cast<int64_t>(labels.size()) - desirable;
  std::printf("mttok: %lld desirable and %lld undesirable examples\n", static_cast<long long>(desirable),
              static_cast<long long>(undesirable));
  const double ratio = undesirable ? double(desirable) / double(undesirable) : INFINITY;
  if (desirable && undesirable && ratio >= 1.0 && ratio <= 4.0 / 3.0) return;
  std::printf("mttok: note: TRL's KTO advice is desirable weight x %lld within 1 to 4/3 of undesirable weight x %lld: "
              "weigh the rarer kind up (mtc --desirable-weight, --undesirable-weight)%s\n",
              static_cast<long long>(desirable), static_cast<long long>(undesirable),
              desirable && undesirable ? "" : "; with one kind alone, KTO still trains, against the KL estimate");
}

}  // namespace

int encodeChat(const Options& o, mt::HfTokenizer& tokenizer) {
  const ChatInputs in = readChatInputs(o);
  const bool pairs = inPairs(o.job);
  const std::vector<mt::ChatExample>& examples = in.examples;
  const std::vector<std::string>& where = in.where;
  std::vector<std::vector<mt::ChatPart>> rendered = renderExamples(o, tokenizer, examples, where);
  if (o.mask_history || pairs)
    for (std::vector<mt::ChatPart>& parts : rendered) countLastReplyOnly(parts);
  const Encoded encoded = encodeExamples(o, tokenizer, in, rendered, documentEnd(o, tokenizer));
  const std::vector<uint32_t>& ids = encoded.ids;
  const std::vector<uint8_t>& counted = encoded.counted;
  const ShapingNote &truncated = encoded.truncated, &nothing_left = encoded.nothing_left;
  const ShapingNote& unrendered_reasoning = encoded.unrendered_reasoning;
  const int64_t crossing_examples = encoded.crossing_examples;
  const int64_t examples_count = static_cast<int64_t>(examples.size());
  if (o.print_ids) {
    printIds(ids);
    return 0;
  }
  int64_t targets = 0;
  for (uint8_t c : counted) targets += c;
  writeTokens(o, ids, tokenizer.vocabSize(), &counted, tokenizer.fingerprint(),
              " in " + std::to_string(examples_count) + " examples, " + std::to_string(targets) + " counted by the loss" +
                  (o.job == Job::Unpaired ? " (" + std::to_string(examples_count / 2) +
                                                " labelled examples, each beside its KL row: each completion)"
                   : pairs                ? " (" + std::to_string(examples_count / 2) + " pairs: each reply" +
                                                (in.margins.empty() ? ")" : "; each pair with its margin)")
                   : o.train_on_prompt    ? " (--train-on-prompt: the prompts too)"
                   : o.mask_history       ? " (--mask-history: each example's last reply)"
                                          : ""),
              &encoded.starts, pairs, o.job == Job::Unpaired ? &in.labels : nullptr,
              in.margins.empty() ? nullptr : &in.margins);
  printLengths(encoded.starts, ids.size(), where, o.job);
  if (o.job == Job::Unpaired) printLabelBalance(in.labels);
  if (in.same_prompt_kl.count)
    std::fprintf(stderr, "mttok: warning: %lld KL row%s a completion of %s own prompt (no other prompt within "
                 "%zu examples; the first: %s), which biases the KL estimate up: interleave examples of different "
                 "prompts\n",
                 static_cast<long long>(in.same_prompt_kl.count), in.same_prompt_kl.count == 1 ? " is" : "s are",
                 in.same_prompt_kl.count == 1 ? "its example's" : "their examples'", mt::kKlTries,
                 in.same_prompt_kl.first.c_str());
  if (in.same_replies.count)
    std::fprintf(stderr, "mttok: warning: %lld pair%s the same chosen and rejected reply (the first: %s): they teach "
                 "no preference\n", static_cast<long long>(in.same_replies.count),
                 in.same_replies.count == 1 ? " has" : "s have", in.same_replies.first.c_str());
  if (truncated.count)
    std::printf("mttok: %lld of %lld examples cut to %s (the first: %s)%s\n", static_cast<long long>(truncated.count),
                static_cast<long long>(examples_count), lengthLimits(o).c_str(), truncated.first.c_str(),
                nothing_left.count ? fmt::format("; {} of them kept no reply token (the first: {})", nothing_left.count,
                                                 nothing_left.first).c_str()
                                   : "");
  if (in.empty_replies.count)
    std::fprintf(stderr, "mttok: warning: %lld example%s an empty reply (the first: %s): trained on, they teach the "
                 "model to answer nothing\n", static_cast<long long>(in.empty_replies.count),
                 in.empty_replies.count == 1 ? " has" : "s have", in.empty_replies.first.c_str());
  if (unrendered_reasoning.count)
    std::printf("mttok: note: %lld repl%s reasoning the template leaves out (the first: %s): Qwen 3's keeps "
                "the reasoning_content after the last user message, gpt-oss's the last reply's thinking, the other "
                "templates none; it is not trained\n",
                static_cast<long long>(unrendered_reasoning.count), unrendered_reasoning.count == 1 ? "y's" : "ies'",
                unrendered_reasoning.first.c_str());
  if (in.with_tools.count)
    std::printf("mttok: %lld example%s tools, tool calls or tool results (the first: %s): each reply of calls is "
                "counted as a reply, through the token that ends it; the tools' schemas and results are read\n",
                static_cast<long long>(in.with_tools.count), in.with_tools.count == 1 ? " has" : "s have",
                in.with_tools.first.c_str());
  if (crossing_examples)
    std::printf("mttok: note: %lld example%s a token across a reply's edge (the prompt's end and the reply's start "
                "in one token, as the whole conversation encodes): counted, as Hugging Face's assistant mask "
                "counts it\n",
                static_cast<long long>(crossing_examples), crossing_examples == 1 ? " has" : "s have");
  return 0;
}

}  // namespace mttok
