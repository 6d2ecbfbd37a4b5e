// Numpy broadcasting for the kernels that support it (shapes aligned at the right; each
// dimension equal or 1), shared by their checks and CPU implementations.
#pragma once
#include <cstdint>
#include <vector>

namespace mt {

// The broadcast shape of `a` and `b`; false if they do not broadcast.
bool broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out);

// Whether `suffix` is the trailing part of `shape` (then it broadcasts over the leading dims).
bool isSuffix(const std::vector<int64_t>& suffix, const std::vector<int64_t>& shape);

// The rows of `shape` that `kept` keeps whole where `kept` is shape's leading dimensions followed
// by ones (`shape` read as (rows, numel / rows): a sum of each row, as DoRA's weight norm sums an
// (out, in) weight's squares to (out, 1)); -1 where it is not.
int64_t keptLeadingRows(const std::vector<int64_t>& kept, const std::vector<int64_t>& shape);

// Whether `in` broadcasts to exactly `out`.
bool broadcastsTo(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// Walks a tensor of shape `out` row by row (rows of the last dimension) and gives, for an
// input broadcast to it, the element offset of each row's start and the step along the row.
class BroadcastIndex {
 public:
  BroadcastIndex(const std::vector<int64_t>& in, const std::vector<int64_t>& out);
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t rowOffset(int64_t row) const;
  int64_t colStep() const { return col_step_; }  // 0 (broadcast) or 1

 private:
  std::vector<int64_t> shape_, strides_;  // the out shape without its last dim; input strides
  int64_t rows_ = 1, cols_ = 1, col_step_ = 0;
};

}  // namespace mt
