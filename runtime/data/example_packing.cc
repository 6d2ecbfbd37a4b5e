#include "runtime/data/example_packing.h"

#include <algorithm>
#include <numeric>

#include "kernels/random/counter_rng.h"

namespace mt {

int64_t placeExample(const TokenFile& data, int64_t start, int64_t end, int64_t space, std::vector<uint8_t>& mask,
                     const RowSlots& slots, int64_t& counted) {
  const int64_t length = std::min(end - start, space + 1), used = std::min(length, space);
  const std::vector<uint32_t> example = data.read(start, length, &mask);
  for (int64_t t = 0; t < used; ++t) {
    slots.tokens[t] = static_cast<int32_t>(example[t]);
    const bool counts = t + 1 < length && mask[t + 1];
    slots.targets[t] = counts ? static_cast<int32_t>(example[t + 1]) : -1;
    counted += counts;
    if (slots.kept) slots.kept[t] = 1.0f;
    if (slots.positions) slots.positions[t] = static_cast<int32_t>(t);
  }
  return used;
}

void padSlots(const RowSlots& slots, int64_t count) {
  std::fill(slots.tokens, slots.tokens + count, 0);
  std::fill(slots.targets, slots.targets + count, -1);
  if (slots.kept) std::fill(slots.kept, slots.kept + count, 0.0f);
  if (slots.positions) std::iota(slots.positions, slots.positions + count, 0);
}

std::vector<size_t> nextFitRows(const std::vector<int64_t>& slots, int64_t seq) {
  std::vector<size_t> row_first;
  int64_t used = seq;  // the slots taken in the current row: none open yet
  for (size_t i = 0; i < slots.size(); ++i) {
    if (used + slots[i] > seq) row_first.push_back(i), used = 0;
    used += slots[i];
  }
  return row_first;
}

PackedRows::PackedRows(const TokenFile& data, std::vector<size_t> order, int64_t end, int64_t seq)
    : data_(data), order_(std::move(order)), end_(end), seq_(seq) {
  std::vector<int64_t> slots(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) slots[i] = std::min(length(i), seq);
  row_first_ = nextFitRows(slots, seq);
}

int64_t PackedRows::fill(int64_t row, std::vector<uint8_t>& mask, const RowSlots& slots) const {
  const size_t first = row_first_.at(static_cast<size_t>(row));
  const size_t last = static_cast<size_t>(row) + 1 < row_first_.size() ? row_first_[row + 1] : order_.size();
  int64_t counted = 0, used = 0;
  for (size_t i = first; i < last; ++i) {
    const int64_t start = data_.exampleStarts()[order_[i]];
    used += placeExample(data_, start, data_.exampleEnd(order_[i], end_), seq_ - used, mask, slots.at(used), counted);
  }
  padSlots(slots.at(used), seq_ - used);
  return counted;
}

PackedPasses::PackedPasses(const TokenFile& data, size_t first, size_t last, int64_t end, int64_t seq,
                           uint64_t seed)
    : data_(data), first_(first), last_(last), end_(end), seq_(seq), seed_(seed) {}

std::vector<size_t> examplesInOrder(size_t first, size_t last) {
  std::vector<size_t> order(last - first);
  std::iota(order.begin(), order.end(), first);
  return order;
}

int64_t packedRowsInOrder(const TokenFile& data, size_t first, size_t last, int64_t end, int64_t seq) {
  return PackedRows(data, examplesInOrder(first, last), end, seq).rows();
}

// Pass p: the examples in a Fisher-Yates shuffle drawn from (seed, p), packed.
PackedRows PackedPasses::pass(int64_t p) const {
  std::vector<size_t> order = examplesInOrder(first_, last_);
  const uint64_t key = splitmix64(splitmix64(seed_ ^ 0x9ac4ed) ^ static_cast<uint64_t>(p));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[splitmix64(key + i) % i]);
  return PackedRows(data_, std::move(order), end_, seq_);
}

int64_t PackedPasses::fill(int64_t row, std::vector<uint8_t>& mask, const RowSlots& slots) const {
  int64_t p = 0, begins = 0;  // the pass holding `row`, and its first row
  for (;; ++p) {
    if (static_cast<size_t>(p) == pass_rows_.size()) {  // a pass not counted yet: packed once, kept
      current_ = {p, std::make_shared<const PackedRows>(pass(p))};
      pass_rows_.push_back(current_.second->rows());
    }
    if (row < begins + pass_rows_[p]) break;
    begins += pass_rows_[p];
  }
  if (current_.first != p) current_ = {p, std::make_shared<const PackedRows>(pass(p))};
  return current_.second->fill(row - begins, mask, slots);
}

}  // namespace mt
