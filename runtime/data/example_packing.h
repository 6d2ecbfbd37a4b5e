// Instruction examples laid into the rows of a batch: one per row (mtrun --rows examples), or
// whole examples packed into each row (--rows packed-examples, for a plan of mtc
// --packed-examples, whose attention keeps each example to itself by the positions written here).
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/data/token_data.h"

namespace mt {

// Where a row's slots go: tokens and targets always; `kept` (1 for an example's tokens, 0 for
// padding: the router statistics' token mask) and `positions` (each token's position in its
// example, from 0) where the plan has them.
struct RowSlots {
  int32_t* tokens;
  int32_t* targets;
  float* kept = nullptr;
  int32_t* positions = nullptr;
  RowSlots at(int64_t offset) const {
    return {tokens + offset, targets + offset, kept ? kept + offset : nullptr, positions ? positions + offset : nullptr};
  }
};

// Example [start, end) of `data` at the start of a row's `space` slots: its tokens, each next one
// as its target where the file's mask counts it (-1 elsewhere, and at its last token), cut after
// space + 1 tokens (a longer example fills the slots, its last one's target the next token).
// Returns the slots used, min(end - start, space); adds the targets counted to `counted`.
int64_t placeExample(const TokenFile& data, int64_t start, int64_t end, int64_t space, std::vector<uint8_t>& mask,
                     const RowSlots& slots, int64_t& counted);
// Slots [0, count): padding (token 0, target -1, kept 0), its positions from 0 as one example's.
void padSlots(const RowSlots& slots, int64_t count);

// Examples taking `slots[i]` slots each (at most `seq`), in turn, next fit into rows of `seq`
// slots: an example that does not fit in what is left of the current row starts the next. Returns
// the index of each row's first example.
std::vector<size_t> nextFitRows(const std::vector<int64_t>& slots, int64_t seq);

// Whole examples packed into rows of `seq` slots, in the order given, next fit: an example that
// does not fit in what is left of the current row starts the next (the rest padding); one longer
// than a row fills a row of its own, cut as placeExample cuts it.
class PackedRows {
 public:
  // `order`: indices into data.exampleStarts(); an example ends at the next's start, or at `end`.
  PackedRows(const TokenFile& data, std::vector<size_t> order, int64_t end, int64_t seq);
  int64_t rows() const { return static_cast<int64_t>(row_first_.size()); }
  // Row `row` into `slots` (seq of each); returns the targets counted.
  int64_t fill(int64_t row, std::vector<uint8_t>& mask, const RowSlots& slots) const;

 private:
  int64_t length(size_t i) const { return data_.exampleEnd(order_[i], end_) - data_.exampleStarts()[order_[i]]; }

  const TokenFile& data_;
  std::vector<size_t> order_;
  std::vector<size_t> row_first_;  // row r holds order_[row_first_[r] .. row_first_[r + 1])
  int64_t end_, seq_;
};

// Examples first, first + 1, ..., last - 1: the file's order.
std::vector<size_t> examplesInOrder(size_t first, size_t last);

// The rows examples [first, last) of `data` (the last ending at `end`) pack into in file order: a
// pass's count without a seed (each pass's shuffle packs into a few rows more or fewer), what
// --epochs and mtrun's start count by.
int64_t packedRowsInOrder(const TokenFile& data, size_t first, size_t last, int64_t end, int64_t seq);

// The training rows of --rows packed-examples: pass p over the examples [first, last) is a
// shuffle of them keyed by (seed, p), packed (PackedRows); the passes follow each other, so each
// example is in one row per pass. Row `row` of the run is found from the start, whatever came
// before (resuming needs that); the pass holding it is kept for the next calls (so one thread
// fills at a time).
class PackedPasses {
 public:
  PackedPasses(const TokenFile& data, size_t first, size_t last, int64_t end, int64_t seq, uint64_t seed);
  int64_t fill(int64_t row, std::vector<uint8_t>& mask, const RowSlots& slots) const;

 private:
  PackedRows pass(int64_t p) const;

  const TokenFile& data_;
  size_t first_, last_;
  int64_t end_, seq_;
  uint64_t seed_;
  // Passes [0, pass_rows_.size()) counted: pass p's rows begin at the sum of the counts before it.
  mutable std::vector<int64_t> pass_rows_;
  mutable std::pair<int64_t, std::shared_ptr<const PackedRows>> current_{-1, nullptr};
};

}  // namespace mt
