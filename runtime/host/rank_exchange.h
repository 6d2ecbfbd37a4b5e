// The host optimizer sharded over data-parallel ranks (DESIGN.md §13; docs/distributed.md): what
// a rank owns (Shard) and what the ranks exchange (RankExchange). The host optimizer and the
// host store use the interface; runtime/distributed/rank_exchange.h implements it on MPI.
//
// Rank r of N owns a contiguous slice of every parameter: its AdamW moments (only that slice is
// held), the update of that slice, and the step's summed gradient there. Slices are runs of
// whole AdamW chunks (kAdamWChunk), so the chunks' sums of squares that make the global norm are
// the same numbers on the owners as in one process, added in the same order: exact clipping.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/adamw/adamw.h"
#include "kernels/adamw/master_weights.h"

namespace mt {

// Elements [begin, end) of a tensor.
struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

struct Shard {
  int rank = 0, ranks = 1;
  // One host copy: the ranks of a host share one copy of the master weights (and their bf16
  // copies), which its local rank 0 allocates and writes when it is set whole (initial weights, a
  // checkpoint); each rank updates its slices of it in place.
  bool shared_copy = false;
  bool writes_copy = true;  // this rank allocates and sets the copy (its own, or its host's)

  // Rank r's slice of parameter `param` (its host tensor index), n elements: piece p = (r +
  // param) mod N of its C chunks, chunks [C·p/N, C·(p+1)/N). A tensor of fewer chunks than ranks
  // leaves some ranks none; the rotation spreads such tensors (norm weights, biases) over the
  // ranks.
  ShardRange of(int64_t n, int param, int r) const {
    const int64_t chunks = adamw_chunks(n), piece = (r + param) % ranks;
    return {std::min(n, chunks * piece / ranks * kAdamWChunk), std::min(n, chunks * (piece + 1) / ranks * kAdamWChunk)};
  }
  ShardRange of(int64_t n, int param) const { return of(n, param, rank); }
};

class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual Shard shard() const = 0;
  // Each call names the parameter (`param`, its host tensor index) whose tensor it exchanges:
  // its slices are shard().of(n, param).
  //
  // Sums gradient `grad` (n elements) over the ranks into this rank's slice: afterwards
  // shard().of(n, param) holds the step's (weighed) mean, in rank order, as --accumulate's sum; the
  // rest of `grad` is this rank's own gradient, not summed.
  virtual void reduceToOwner(float* grad, int64_t n, int param) = 0;
  // The chunk sums of squares of every rank's slice of an n-element tensor: this rank's
  // (adamw_chunks of its slice) from `mine`, all adamw_chunks(n) of them into `all`, in order.
  virtual void gatherChunkSums(const double* mine, int64_t n, int param, double* all) const = 0;
  // After each rank updated its slice of a parameter's master: every rank's slice of each of the
  // master's arrays (fp32, bf16 copy, residual) into place on every rank (with one host copy,
  // from the other hosts only: the host's ranks wrote theirs in place).
  virtual void gatherMaster(const MasterWeights& w, int64_t n, int param) const = 0;
  // Every rank's slice of `data` (n floats) into place on every rank: a summed gradient whole.
  virtual void gatherWhole(float* data, int64_t n, int param) const = 0;
  // Whether `mine` holds on every rank (a step's verdicts: every rank decides alike).
  virtual bool everyRank(bool mine) const = 0;
  // One host copy: `bytes` of memory the host's ranks share (collective over them; null where
  // they share none), and the barrier after its writer set it whole.
  virtual std::byte* sharedHostMemory(int64_t bytes) = 0;
  virtual void hostCopyWritten() const = 0;
  // Rank 0 receives every rank's slice (`mine`: this rank's shard().of(n, param).size() floats)
  // into `whole` (n floats; null on the other ranks): a moment for rank 0's checkpoint.
  virtual void gatherToFirst(const float* mine, int64_t n, int param, float* whole) const = 0;
};

}  // namespace mt
