// The sharded optimizer's exchanges (runtime/distributed/rank_exchange.h) on real MPI ranks: run
// under mpirun (tests/runtime/run_ranks.sh 3 BINARY). Every rank can make every rank's input
// (deterministic in rank and element), so each checks its own result against a one-process
// reference, bit for bit: a gradient summed into its owner's slice is --accumulate's sum
// (accumulate_gradient_cpu in rank order), with pieces smaller than a slice (several rounds of
// MPI_Alltoallv) and with slices of tensors of a few elements, one chunk, a chunk and a bit; the
// gathered chunk sums are sum_squares_cpu's; masters (plain with a bf16 copy, split) and moments
// gathered whole — each rank with its own copy, the ranks of a host sharing one, and two hosts
// of shared copies completed from each other (CTest runs the three: MT_RANKS_PER_HOST).
#include <gtest/gtest.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/adamw/adamw.h"
#include "runtime/distributed/rank_exchange.h"
#include "runtime/distributed/world.h"

namespace mt {
namespace {

const int64_t kSizes[] = {1, 5, kAdamWChunk - 1, kAdamWChunk, kAdamWChunk + 3, 3 * kAdamWChunk + 7, 7 * kAdamWChunk};

// Rank r's value at element i: distinct per rank and element, of varied magnitude.
float valueOf(int rank, int64_t i) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u + 12345u;
  return (static_cast<float>(h % 20011u) - 10005.0f) * (1.0f + static_cast<float>(h >> 28)) * 1e-4f;
}

std::vector<float> rankTensor(int rank, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = valueOf(rank, i);
  return x;
}

bool sameBits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, static_cast<size_t>(n) * 4) == 0; }

TEST(Shard, SlicesAreWholeChunksCoveringTheTensorOnce) {
  for (int ranks : {1, 2, 3, 5})
    for (int64_t n : kSizes)
      for (int param : {0, 1, 4}) {
        const Shard shard{0, ranks};
        std::vector<int> owners(static_cast<size_t>(n), 0);
        for (int r = 0; r < ranks; ++r) {
          const ShardRange s = shard.of(n, param, r);
          ASSERT_LE(0, s.begin);
          ASSERT_LE(s.begin, s.end);
          ASSERT_LE(s.end, n);
          EXPECT_TRUE(s.size() == 0 || s.begin % kAdamWChunk == 0) << "n " << n << " rank " << r;
          for (int64_t i = s.begin; i < s.end; ++i) ++owners[i];
        }
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(owners[i], 1) << "n " << n << " element " << i;
      }
  // Tensors of one chunk go to each rank in turn as the parameter changes.
  const Shard shard{0, 3};
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ((shard.of(10, 0, r).size() > 0) + (shard.of(10, 1, r).size() > 0) + (shard.of(10, 2, r).size() > 0), 1);
}

class RankExchangeTest : public ::testing::TestWithParam<int64_t> {  // the round, in elements
 protected:
  World& world_ = World::get();
};

TEST_P(RankExchangeTest, GradientSummedIntoItsOwnersSliceAsAccumulate) {
  MpiRankExchange exchange(world_, GetParam());
  const int ranks = world_.size(), me = world_.rank();
  // A loss mask's weighing: rank r's gradient times r + 1, the sum over their total.
  std::vector<float> weights;
  float total = 0.0f;
  for (int r = 0; r < ranks; ++r) total += weights.emplace_back(static_cast<float>(r + 1));
  exchange.setStep(0, 1, weights, total);
  for (int64_t n : kSizes)
    for (int param : {0, 1, 2}) {
      std::vector<float> grad = rankTensor(me, n);
      exchange.reduceToOwner(grad.data(), n, param);
      // The reference: --accumulate's sum of the ranks' gradients in rank order.
      std::vector<float> sum(static_cast<size_t>(n)), last;
      for (int r = 0; r < ranks; ++r) {
        last = rankTensor(r, n);
        accumulate_gradient_cpu(sum.data(), last.data(), n, r, ranks, weights[r], total);
      }
      const ShardRange mine = exchange.shard().of(n, param);
      EXPECT_TRUE(sameBits(grad.data() + mine.begin, last.data() + mine.begin, mine.size()))
          << "rank " << me << ": n " << n << ", parameter " << param;
      const std::vector<float> own = rankTensor(me, n);  // the rest stays this rank's own
      EXPECT_TRUE(sameBits(grad.data(), own.data(), mine.begin));
      EXPECT_TRUE(sameBits(grad.data() + mine.end, own.data() + mine.end, n - mine.end));
      // Gathered whole, every rank holds the sum.
      exchange.gatherWhole(grad.data(), n, param);
      EXPECT_TRUE(sameBits(grad.data(), last.data(), n)) << "rank " << me << ": n " << n;
    }
}

TEST_P(RankExchangeTest, MicroStepsSummedInMicroBatchOrderAsAccumulate) {
  MpiRankExchange exchange(world_, GetParam());
  const int ranks = world_.size(), me = world_.rank();
  const int64_t micro_steps = 3, count = micro_steps * ranks;
  for (int64_t n : {int64_t{5}, 3 * kAdamWChunk + 7}) {
    // The reference: micro-batch m's gradient (rank m % N's data at micro-step m / N) in order m.
    std::vector<float> sum(static_cast<size_t>(n)), last;
    for (int64_t m = 0; m < count; ++m) {
      last = rankTensor(static_cast<int>(m), n);
      accumulate_gradient_cpu(sum.data(), last.data(), n, m, count, 1.0f, static_cast<float>(count));
    }
    std::vector<float> grad;
    for (int64_t k = 0; k < micro_steps; ++k) {
      exchange.setStep(k, micro_steps, std::vector<float>(static_cast<size_t>(ranks), 1.0f), static_cast<float>(count));
      grad = rankTensor(static_cast<int>(k * ranks + me), n);
      exchange.reduceToOwner(grad.data(), n, 2);
    }
    const ShardRange mine = exchange.shard().of(n, 2);
    EXPECT_TRUE(sameBits(grad.data() + mine.begin, last.data() + mine.begin, mine.size()))
        << "rank " << me << ": n " << n;
  }
}

TEST_P(RankExchangeTest, ChunkSumsGatheredAreOneProcesssSumOfSquares) {
  const MpiRankExchange exchange(world_, GetParam());
  for (int64_t n : kSizes) {
    const std::vector<float> x = rankTensor(0, n);  // the same tensor on every rank
    const ShardRange mine = exchange.shard().of(n, 3);
    std::vector<double> partial(static_cast<size_t>(adamw_chunks(mine.size()))), all(adamw_chunks(n), -1.0);
    sum_squares_chunks_cpu(x.data() + mine.begin, mine.size(), partial.data());
    exchange.gatherChunkSums(partial.data(), n, 3, all.data());
    const double expected = sum_squares_cpu(x.data(), n), gathered = sum_of_chunks(all.data(), adamw_chunks(n));
    EXPECT_EQ(std::memcmp(&expected, &gathered, sizeof(double)), 0) << "n " << n << ": " << gathered << " vs " << expected;
  }
}

// The master's arrays: this rank's own, or (one host copy: several ranks on a host) the host's,
// in memory its ranks share. Set to garbage: each rank knows only its slice until gathered.
template <typename T>
T* masterArray(MpiRankExchange& exchange, std::vector<std::vector<T>>& own, int64_t n, T garbage) {
  if (!exchange.shard().shared_copy) return own.emplace_back(static_cast<size_t>(n), garbage).data();
  T* shared = reinterpret_cast<T*>(exchange.sharedHostMemory(n * static_cast<int64_t>(sizeof(T))));
  if (exchange.shard().writes_copy) std::fill(shared, shared + n, garbage);
  exchange.hostCopyWritten();
  return shared;
}

TEST_P(RankExchangeTest, MastersAndMomentsGathered) {
  MpiRankExchange exchange(world_, GetParam());
  const int me = world_.rank();
  for (int64_t n : kSizes) {
    const std::vector<float> expected = rankTensor(7, n);
    const ShardRange mine = exchange.shard().of(n, 1);
    std::vector<std::vector<float>> own_f32;
    std::vector<std::vector<uint16_t>> own_u16;
    std::vector<std::vector<int16_t>> own_i16;
    float* plain = masterArray<float>(exchange, own_f32, n, -1.0f);
    uint16_t* copy = masterArray<uint16_t>(exchange, own_u16, n, 0xffff);
    uint16_t* hi = masterArray<uint16_t>(exchange, own_u16, n, 0xffff);
    int16_t* lo = masterArray<int16_t>(exchange, own_i16, n, -1);
    const MasterWeights with_copy{plain, copy, nullptr}, split{nullptr, hi, lo};
    write_master(with_copy, mine.begin, mine.size(), expected.data() + mine.begin);
    write_master(split, mine.begin, mine.size(), expected.data() + mine.begin);
    exchange.gatherMaster(with_copy, n, 1);
    exchange.gatherMaster(split, n, 1);
    std::vector<uint16_t> expected_copy(static_cast<size_t>(n));
    std::vector<float> expected_plain(static_cast<size_t>(n)), restored(static_cast<size_t>(n));
    write_master({expected_plain.data(), expected_copy.data(), nullptr}, 0, n, expected.data());
    read_master(split, 0, n, restored.data());
    EXPECT_TRUE(sameBits(plain, expected.data(), n)) << "rank " << me << ", n " << n;
    EXPECT_EQ(std::vector<uint16_t>(copy, copy + n), expected_copy) << "rank " << me << ", n " << n;
    EXPECT_TRUE(sameBits(restored.data(), expected.data(), n)) << "rank " << me << ", n " << n;
    // A moment's slices to rank 0 (a checkpoint).
    std::vector<float> whole(me == 0 ? static_cast<size_t>(n) : 0);
    exchange.gatherToFirst(expected.data() + mine.begin, n, 1, me == 0 ? whole.data() : nullptr);
    if (me == 0) EXPECT_TRUE(sameBits(whole.data(), expected.data(), n)) << "n " << n;
  }
}

// Rounds of a few elements (many MPI_Alltoallv per tensor), of about a chunk, and the default.
INSTANTIATE_TEST_SUITE_P(Rounds, RankExchangeTest, ::testing::Values(int64_t{1000}, int64_t{3} << 16, int64_t{1} << 26));

}  // namespace
}  // namespace mt

int main(int argc, char** argv) {
  mt::World& world = mt::World::start(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (world.size() < 2) {
    std::fprintf(stderr, "mt_rank_exchange_tests: run it under mpirun with 2 or more ranks (tests/runtime/run_ranks.sh)\n");
    return 2;
  }
  world.boundWaits(120);  // a rank that fell out of step ends the test, not hangs it
  // Rank 0 prints every test; the others only their failures (which fail the job: their exit code).
  if (world.rank() != 0) GTEST_FLAG_SET(brief, true);
  return RUN_ALL_TESTS();
}
