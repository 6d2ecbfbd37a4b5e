#include "runtime/distributed/rank_exchange.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "runtime/io/error.h"

#include "kernels/adamw/adamw.h"

namespace mt {

void MpiRankExchange::setStep(int64_t micro_step, int64_t micro_steps, std::vector<float> weights, float divisor) {
  micro_step_ = micro_step;
  micro_steps_ = micro_steps;
  weights_ = std::move(weights);
  divisor_ = divisor;
}

void MpiRankExchange::slices(int64_t n, int param, std::vector<int64_t>& counts, std::vector<int64_t>& offsets) const {
  const Shard shard = this->shard();
  counts.resize(static_cast<size_t>(shard.ranks));
  offsets.resize(static_cast<size_t>(shard.ranks));
  for (int r = 0; r < shard.ranks; ++r) {
    const ShardRange range = shard.of(n, param, r);
    offsets[r] = range.begin;
    counts[r] = range.size();
  }
}

void MpiRankExchange::reduceToOwner(float* grad, int64_t n, int param) {
  const int ranks = world_.size(), me = world_.rank();
  std::vector<int64_t> slice_counts, slice_offsets;
  slices(n, param, slice_counts, slice_offsets);
  // Rounds: each moves the next piece of every rank's slice, at most round_ elements in all.
  const int64_t widest = *std::max_element(slice_counts.begin(), slice_counts.end());
  const int64_t piece = std::max<int64_t>(1, round_ / ranks);
  // The running sum of this rank's slice: for this call alone, or kept over the micro-steps.
  float* sum = nullptr;
  if (micro_steps_ > 1) {
    std::vector<float>& kept = sums_[param];
    kept.resize(static_cast<size_t>(std::max<int64_t>(slice_counts[me], 1)));  // once: the same size each step
    sum = kept.data();
  } else {
    sum_.resize(static_cast<size_t>(std::max<int64_t>(std::min(piece, slice_counts[me]), 1)));
  }
  std::vector<int64_t> counts(static_cast<size_t>(ranks)), offsets(static_cast<size_t>(ranks));
  for (int64_t done = 0; done < widest || done == 0; done += piece) {
    for (int r = 0; r < ranks; ++r) {
      offsets[r] = slice_offsets[r] + std::min(done, slice_counts[r]);
      counts[r] = std::min(piece, slice_offsets[r] + slice_counts[r] - offsets[r]);
    }
    const int64_t mine = counts[me];
    received_.resize(static_cast<size_t>(std::max<int64_t>(mine * ranks, 1)));
    world_.exchangeSlices(grad, counts, offsets, received_.data());
    // Micro-batch order (k·N + r), as --accumulate's: the first starts the sum, the last leaves
    // the mean in its own piece, which goes back into place.
    float* piece_sum = micro_steps_ > 1 ? sum + (offsets[me] - slice_offsets[me]) : sum_.data();
    const int64_t count = micro_steps_ * ranks;
    for (int r = 0; r < ranks; ++r)
      accumulate_gradient_cpu(piece_sum, received_.data() + r * mine, mine, micro_step_ * ranks + r, count,
                              weights_[r], divisor_);
    if (micro_step_ + 1 == micro_steps_)
      std::memcpy(grad + offsets[me], received_.data() + (ranks - 1) * mine, static_cast<size_t>(mine) * sizeof(float));
  }
}

int64_t MpiRankExchange::bufferBytes(const plan::Plan& plan) const {
  int64_t widest = 0;  // the largest slice of a trained parameter this rank owns
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const auto& t = plan.host_tensors(i);
    if (t.role() != plan::ROLE_PARAM || t.frozen()) continue;  // a frozen one exchanges nothing
    const int64_t n = checkedNumel(t.shape(), t.name());
    if (n > std::numeric_limits<int>::max())
      throw Error("data parallel: parameter '" + t.name() + "' has " + std::to_string(n) +
                  " elements, more than MPI's int counts carry (2^31 - 1): train it in one process");
    widest = std::max(widest, shard().of(n, i).size());
  }
  const int64_t ranks = world_.size(), piece = std::max<int64_t>(1, round_ / ranks);
  return 4 * (std::min(round_, widest * ranks) + std::min(piece, widest));  // received_ and sum_
}

bool MpiRankExchange::everyRank(bool mine) const {
  const std::vector<int64_t> all = world_.allgather(static_cast<int64_t>(mine));
  return std::all_of(all.begin(), all.end(), [](int64_t v) { return v != 0; });
}

void MpiRankExchange::gatherChunkSums(const double* mine, int64_t n, int param, double* all) const {
  const Shard shard = this->shard();
  std::vector<int64_t> counts(static_cast<size_t>(shard.ranks)), offsets(static_cast<size_t>(shard.ranks));
  for (int r = 0; r < shard.ranks; ++r) {
    const ShardRange range = shard.of(n, param, r);  // whole chunks: its first begins one
    offsets[r] = range.begin / kAdamWChunk;
    counts[r] = adamw_chunks(range.size());
  }
  std::copy(mine, mine + counts[shard.rank], all + offsets[shard.rank]);
  world_.allgatherSlices(all, World::Scalar::kF64, counts, offsets);
}

void MpiRankExchange::gatherMaster(const MasterWeights& w, int64_t n, int param) const {
  std::vector<int64_t> counts, offsets;
  World::Group group = World::Group::kAll;
  if (world_.sharesHostMemory()) {
    // The host's ranks wrote their slices into the host's copy; this rank brings in its peers'
    // (its local rank on the other hosts), then the host's ranks wait for each other.
    group = World::Group::kPeers;
    for (int peer : world_.peers()) {
      const ShardRange range = shard().of(n, param, peer);
      offsets.push_back(range.begin);
      counts.push_back(range.size());
    }
  } else {
    slices(n, param, counts, offsets);
  }
  if (w.f32) world_.allgatherSlices(w.f32, World::Scalar::kF32, counts, offsets, group);
  if (w.bf16) world_.allgatherSlices(w.bf16, World::Scalar::kU16, counts, offsets, group);
  if (w.residual) world_.allgatherSlices(w.residual, World::Scalar::kI16, counts, offsets, group);
  world_.hostBarrier();  // no-op without a host copy
}

void MpiRankExchange::gatherWhole(float* data, int64_t n, int param) const {
  std::vector<int64_t> counts, offsets;
  slices(n, param, counts, offsets);
  world_.allgatherSlices(data, World::Scalar::kF32, counts, offsets);
}

void MpiRankExchange::gatherToFirst(const float* mine, int64_t n, int param, float* whole) const {
  std::vector<int64_t> counts, offsets;
  slices(n, param, counts, offsets);
  world_.gatherSlicesToFirst(mine, World::Scalar::kF32, counts, offsets, whole);
}

}  // namespace mt
