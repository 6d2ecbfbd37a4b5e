// Token files: a 32-byte header, then `count` little-endian token ids, then (version 2) a loss
// mask: `count` bytes, 1 where the token counts as a target of the loss, 0 where it does not
// (an instruction's prompt: the model reads it, is not trained to write it), then (version 3,
// instruction data: mttok --chat) its examples: a u64 `examples`, then each example's first
// token as a u64, the first 0, strictly rising, below `count` (an example runs to the next's
// start, the last to the end; its end-of-text token is its last); version 4 (preference data:
// mttok --preferences) as version 3, its examples in pairs: 2i a prompt and its chosen reply,
// 2i + 1 the same prompt and its rejected reply, each counting its reply alone; version 5 (KTO's
// unpaired data: mttok --unpaired) as version 4, its pairs an example (a prompt and a completion)
// and its KL row (the same prompt and another example's completion), then one byte per pair after
// the examples' starts, 1 where the example's completion is desirable and 0 where it is not;
// version 6 (preference data with TRL's "margin" column: mttok --preferences) as version 4, then
// each pair's margin after the starts, a little-endian f32, finite.
//   offset 0  char[8]  magic "MTTOKENS"
//   offset 8  u32      version (1: no mask; 2: a loss mask follows the ids; 3: and the examples;
//                      4: and they are (chosen, rejected) pairs; 5: (example, KL row) pairs
//                      and their labels; 6: (chosen, rejected) pairs and their margins)
//   offset 12 u32      bytes per token (2 or 4)
//   offset 16 u64      count
//   offset 24 u32      vocab size (every id is < it)
//   offset 28 u32      the tokenizer's fingerprint (0: not recorded; mttok writes it since
//                      session 16: HfTokenizer::fingerprint, or a constant per built-in tokenizer)
// The reader checks the header, the size and every id when it opens the file, and again on every
// read: a file truncated or rewritten under a run is an error naming it, never a crash (as a
// memory mapping would be) or out-of-vocabulary ids reaching the model.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"

namespace mt {

inline constexpr char kTokenMagic[8] = {'M', 'T', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr uint32_t kTokenVersion = 1;        // ids only
inline constexpr uint32_t kTokenMaskedVersion = 2;  // ids and a loss mask
inline constexpr uint32_t kTokenExamplesVersion = 3;  // ids, a loss mask and the examples' starts
inline constexpr uint32_t kTokenPairsVersion = 4;     // and the examples are (chosen, rejected) pairs
inline constexpr uint32_t kTokenLabelledVersion = 5;  // or (example, KL row) pairs, each example labelled
inline constexpr uint32_t kTokenMarginsVersion = 6;   // or (chosen, rejected) pairs, each with a margin

// How a batch's rows are cut from the tokens (mtrun --rows): windows starting anywhere (packed,
// an example may begin mid-row and run into the next), one example per row from its start, the
// rest of the row padding that counts for nothing, or whole examples packed into each row (a
// plan of packed examples keeps each to itself; runtime/data/example_packing.h), or one example
// per row in (chosen, rejected) pairs, rows 2j and 2j + 1 a pair's (a preference plan: mtc
// --objective dpo; preference data, mttok --preferences). All but the first need a file that
// records its examples.
enum class RowLayout { kPacked, kExamples, kPackedExamples, kPairs };
inline bool byExamples(RowLayout layout) { return layout != RowLayout::kPacked; }
// A layout's name as mtrun's --rows takes it ("packed", "examples", "packed-examples", "pairs"), and
// the flag that chooses it ("--rows examples").
inline constexpr RowLayout kRowLayouts[] = {RowLayout::kPacked, RowLayout::kExamples, RowLayout::kPackedExamples,
                                            RowLayout::kPairs};
std::string rowsName(RowLayout layout);
inline std::string rowsFlag(RowLayout layout) { return "--rows " + rowsName(layout); }

class PackedRows;
class PackedPasses;

class TokenFile {
 public:
  // Throws mt::Error naming the problem for a missing, truncated or malformed file.
  explicit TokenFile(const std::string& path);

  int64_t size() const { return count_; }
  bool hasLossMask() const { return masked_; }
  uint32_t vocabSize() const { return vocab_; }
  // The largest id the file holds (all below vocabSize(), checked when it is opened).
  uint32_t largestId() const { return largest_id_; }
  // Ids must lie below `limit` from now on: a model whose vocabulary is smaller than the
  // tokenizer's (Gemma 3 1B's 262,144 beside its tokenizer's 262,145 ids), whose ids past it the
  // file does not use. Throws mt::Error if the file holds one; a later read meeting one (the file
  // changed) fails as any change does. Call before reading from several threads.
  void limitIds(uint32_t limit);
  const std::string& path() const { return path_; }
  // The fingerprint of the tokenizer that made the file; 0 where it was not recorded.
  uint32_t tokenizerFingerprint() const { return tokenizer_fingerprint_; }
  // Each example's first token (version 3), or empty.
  const std::vector<int64_t>& exampleStarts() const { return example_starts_; }
  bool hasExamples() const { return !example_starts_.empty(); }
  // Version 4: examples 2i and 2i + 1 are a prompt's chosen and rejected replies; version 5: an
  // example and its KL row, pair i labelled labels()[i] (1 desirable, 0 undesirable).
  bool hasPairs() const { return pairs_; }
  bool hasLabels() const { return !labels_.empty(); }
  const std::vector<uint8_t>& labels() const { return labels_; }
  // Version 6: pair i's margin (a reward model's: its chosen reply's reward must beat the rejected
  // one's by it), margins()[i].
  bool hasMargins() const { return !margins_.empty(); }
  const std::vector<float>& margins() const { return margins_; }
  // Throws mt::Error naming the --rows that needs them (`layout`: examples or packed-examples),
  // the file (`what`: its part, "token file" or "held-out token file") and the fix unless it
  // records its examples.
  void requireExamples(RowLayout layout, const std::string& what = "token file") const;
  // Example i's tokens [start, end) within [begin, end_limit): its end is the next example's
  // start, the file's end or `end_limit`, whichever comes first.
  int64_t exampleEnd(size_t i, int64_t end_limit) const;
  // The first example starting at or after `token` (the examples' count when none does).
  size_t firstExampleFrom(int64_t token) const;
  // The CRC-32C of the whole file as it was opened (a run's provenance names its data by it).
  uint32_t checksum() const { return crc32c_; }
  // Tokens [first, first + count): throws mt::Error if the range is outside the file or the file
  // changed since it was opened (its size or modification time, or an id now past the vocabulary).
  // Safe to call from several threads. With `counted`, also the loss mask of those tokens (all 1
  // in a file without one).
  std::vector<uint32_t> read(int64_t first, int64_t count, std::vector<uint8_t>* counted = nullptr) const;

 private:
  // Reads and decodes tokens [first, first + count) into `out`; `changed` is the error for a
  // short read or an id past the vocabulary. With `crc`, continues it over the bytes read (the
  // file's checksum, taken when it is opened; not on the per-batch reads).
  void readChecked(int64_t first, int64_t count, uint32_t* out, const std::function<Error(const std::string&)>& changed,
                   uint32_t* crc = nullptr) const;
  // The loss mask of tokens [first, first + count) into `out` (each byte checked to be 0 or 1).
  void readMask(int64_t first, int64_t count, uint8_t* out, const std::function<Error(const std::string&)>& changed,
                uint32_t* crc = nullptr) const;
  IoFault changedError(const std::string& what) const;
  // Version 3: the `examples` starts after the mask, each checked (from 0, rising, in the file);
  // version 5: and the pairs' labels after them, each 0 or 1; version 6: their margins, each finite.
  void readExamples(uint64_t examples, uint32_t version, const std::function<Error(const std::string&)>& bad);

  std::string path_;
  InputFile file_;
  int64_t modified_ns_ = 0;  // st_mtim when opened
  uint32_t bytes_per_token_ = 0;
  bool masked_ = false;
  int64_t count_ = 0;
  uint32_t vocab_ = 0;
  uint32_t id_limit_ = 0;  // every id read must lie below it: vocab_, or limitIds'
  uint32_t largest_id_ = 0;
  uint32_t crc32c_ = 0;
  uint32_t tokenizer_fingerprint_ = 0;
  std::vector<int64_t> example_starts_;
  bool pairs_ = false;
  std::vector<uint8_t> labels_;  // version 5: one per pair
  std::vector<float> margins_;   // version 6: one per pair
};

// The fingerprints of mttok's built-in tokenizations (--bytes, --bpe); a tokenizer.json's is
// HfTokenizer::fingerprint.
inline constexpr uint32_t kBytesTokenizerFingerprint = 0x62797465;  // "byte"
inline constexpr uint32_t kGpt2BpeTokenizerFingerprint = 0x67707432;  // "gpt2"

// Writes a token file atomically. Ids must be < vocab_size; 2-byte ids when vocab_size <= 65536.
// With `counted` (one 0/1 byte per id): version 2, the loss mask after the ids; with
// `example_starts` too (each example's first id, from 0, rising): version 3.
// `tokenizer_fingerprint` (0: none) goes into the header. With `pairs` (an even count of
// examples): version 4, the examples (chosen, rejected) pairs; with `labels` too (one 0/1 per
// pair): version 5, (example, KL row) pairs; with `margins` instead (one finite float per pair):
// version 6.
void writeTokenFile(const std::string& path, const std::vector<uint32_t>& ids, uint32_t vocab_size,
                    const std::vector<uint8_t>* counted = nullptr, uint32_t tokenizer_fingerprint = 0,
                    const std::vector<int64_t>* example_starts = nullptr, bool pairs = false,
                    const std::vector<uint8_t>* labels = nullptr, const std::vector<float>* margins = nullptr);

// Deterministic training batches: for (step, row) a window start drawn from a counter-based
// generator keyed by the seed, so any step's batch can be produced without the ones before it
// (which is what resuming needs).
class BatchSampler {
 public:
  // Windows are drawn from tokens [begin, end) (default: the whole file); kExamples,
  // kPackedExamples: the examples that start there (the file must record them). kPackedExamples:
  // `step_rows`, the rows of a step (its micro-batches' and ranks' together; default `batch`),
  // place each step's rows in the run's sequence of packed rows.
  BatchSampler(const TokenFile& data, int64_t batch, int64_t seq, uint64_t seed, int64_t begin = 0,
               int64_t end = -1, RowLayout layout = RowLayout::kPacked, int64_t step_rows = 0);
  // tokens[b][t] = data[start + t], targets[b][t] = data[start + t + 1], where each start is
  // drawn from (seed, step, first_row + b): with first_row = m * batch, micro-batch m of an
  // accumulated step holds rows [m * batch, (m + 1) * batch) of what a sampler of the whole
  // step's batch draws. A target the file's loss mask leaves out is -1 (the loss ignores it).
  // kExamples: the draw picks an example; the row holds it from its start (cut after seq + 1
  // tokens), then padding (token 0, target -1). Returns the targets counted. Throws mt::Error if
  // the file changed underneath (see TokenFile::read). `kept` (B, T), where given: 1 for a row's
  // tokens, 0 for its padding (the router's statistics leave it out: a plan's "token_mask").
  // kPackedExamples: row b is row step * step_rows + first_row + b of the run's packed rows (each
  // pass a new shuffle of the examples, each example once in it: PackedPasses). `positions` (B,
  // T), where given (a plan of packed examples): each token's position in its example from 0
  // (from the row's start for packed windows, from 0 in the padding).
  int64_t fill(int64_t step, int32_t* tokens, int32_t* targets, int64_t first_row = 0, float* kept = nullptr,
               int32_t* positions = nullptr) const;
  // kPairs: the example that row `row` (counted over the whole step, first_row + b) of step
  // `step` holds. Rows 2j and 2j + 1 hold pair p's examples 2p and 2p + 1, p drawn from (seed,
  // step, row / 2) as kExamples draws an example; the pairs are those whose examples start in
  // [begin, end).
  size_t exampleOfRow(int64_t step, int64_t row) const;
  // kExamples, kPackedExamples, kPairs: the examples drawn from ([firstExample(), +examples())),
  // and how many are longer than a row (their tails cut).
  size_t firstExample() const { return first_example_; }
  int64_t examples() const { return static_cast<int64_t>(last_example_ - first_example_); }
  int64_t examplesCut() const;
  // kExamples, kPackedExamples: the slots the examples take in rows (each min(length, seq)).
  int64_t exampleSlots() const;
  // kPackedExamples: the rows a pass over the examples packs into, counted in file order
  // (packedRowsInOrder: a shuffled pass packs into a few more or fewer).
  int64_t packedRowsPerPass() const;

 private:
  const TokenFile& data_;
  int64_t batch_, seq_;
  uint64_t seed_;
  int64_t begin_, end_;
  RowLayout layout_;
  int64_t step_rows_;
  size_t first_example_ = 0, last_example_ = 0;  // by examples: [first, last) start in [begin, end)
  std::shared_ptr<const PackedPasses> passes_;   // kPackedExamples
};

// Held-out batches for validation: tokens [begin, end) cut in order into consecutive windows of
// seq + 1 tokens overlapping by one (window k: tokens begin + k·seq .. begin + (k+1)·seq; each
// token after the first is the target once), `batch` windows per batch, the last batch's rows
// past the final window padding (token 0, target -1: the loss ignores them). One pass over
// every batch is one pass over the held-out tokens; `max_batches` > 0 keeps the first ones only.
class HeldOutBatches {
 public:
  // Throws mt::Error if [begin, end) holds fewer than seq + 1 tokens.
  // kExamples: each held-out example that starts in [begin, end) one row, in order (cut and
  // padded as BatchSampler's); kPairs: the same, of whole pairs (an even batch: each batch whole
  // pairs); kPackedExamples: those examples in order, packed (PackedRows).
  HeldOutBatches(const TokenFile& data, int64_t batch, int64_t seq, int64_t begin, int64_t end,
                 int64_t max_batches = 0, RowLayout layout = RowLayout::kPacked);
  int64_t windows() const { return windows_; }
  // kExamples, kPairs: the first example, row 0 of batch 0 (row r of batch i: example
  // firstExample() + i * batch + r while below windows()).
  size_t firstExample() const { return first_example_; }
  // The rows of batch i that hold data (the rest padding).
  int64_t dataRows(int64_t i) const { return std::clamp<int64_t>(windows_ - i * batch_, 0, batch_); }
  int64_t batches() const { return batches_; }          // those validated (max_batches applied)
  int64_t allBatches() const { return all_batches_; }   // a whole pass
  // Batch i's tokens and targets (a target the file's mask leaves out is -1); returns the
  // targets counted. Throws mt::Error if the file changed underneath. `kept`, `positions`: as
  // BatchSampler's.
  int64_t fill(int64_t i, int32_t* tokens, int32_t* targets, float* kept = nullptr,
               int32_t* positions = nullptr) const;

 private:
  const TokenFile& data_;
  int64_t batch_, seq_, begin_, end_, windows_, all_batches_, batches_;
  RowLayout layout_;
  size_t first_example_ = 0;
  std::shared_ptr<const PackedRows> packed_;  // kPackedExamples
};

}  // namespace mt
