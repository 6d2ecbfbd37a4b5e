#include "kernels/broadcast.h"

#include <algorithm>

namespace mt {

bool broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    shape[i] = da == 1 ? db : da;
  }
  *out = std::move(shape);
  return true;
}

bool isSuffix(const std::vector<int64_t>& suffix, const std::vector<int64_t>& shape) {
  if (suffix.size() > shape.size()) return false;
  return std::equal(suffix.begin(), suffix.end(), shape.end() - suffix.size());
}

int64_t keptLeadingRows(const std::vector<int64_t>& kept, const std::vector<int64_t>& shape) {
  if (kept.size() != shape.size()) return -1;
  size_t d = 0;
  int64_t rows = 1;
  for (; d < shape.size() && kept[d] == shape[d]; ++d) rows *= shape[d];
  for (size_t rest = d; rest < shape.size(); ++rest)
    if (kept[rest] != 1) return -1;
  return rows;
}

bool broadcastsTo(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != out[lead + i] && in[i] != 1) return false;
  return true;
}

BroadcastIndex::BroadcastIndex(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (out.empty()) return;
  const size_t lead = out.size() - in.size();
  std::vector<int64_t> in_strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    in_strides[lead + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  cols_ = out.back();
  col_step_ = in_strides.back() ? 1 : 0;
  shape_.assign(out.begin(), out.end() - 1);
  strides_.assign(in_strides.begin(), in_strides.end() - 1);
  for (int64_t d : shape_) rows_ *= d;
}

int64_t BroadcastIndex::rowOffset(int64_t row) const {
  int64_t offset = 0;
  for (size_t i = shape_.size(); i-- > 0;) {
    offset += (row % shape_[i]) * strides_[i];
    row /= shape_[i];
  }
  return offset;
}

}  // namespace mt
