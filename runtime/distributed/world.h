// Data parallel over ranks that mpirun launches (DESIGN.md §13; docs/distributed.md): which rank
// this process is, how many run, and the few collectives the trainer needs. MPI (OpenMPI from
// Debian) is the engine; without it (a build without libopenmpi-dev, or a plain `mtrun`) the
// world is one rank and nothing here talks to anyone.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace mt {

class World {
 public:
  // Starts MPI when this process was launched by mpirun (its environment says so) in a build
  // with MPI; a plain start is a world of one. Throws mt::Error when mpirun launched several
  // ranks of a build without MPI (each would train alone). Call once, first thing in main.
  static World& start(int* argc, char*** argv);
  // The world start() made (a world of one before it).
  static World& get();
  World(const World&) = delete;
  World& operator=(const World&) = delete;
  ~World();  // MPI_Finalize, when started (its wait watched), then the watchdog stopped

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's index among the ranks of its host (picks its GPU), and how many share the host.
  int localRank() const { return local_rank_; }
  int localSize() const { return local_size_; }
  bool distributed() const { return size_ > 1; }

  // Bounds every wait of this rank's collectives for the others: a wait past `seconds` means a
  // rank hung, was stopped or lost its host, and would leave the job waiting forever, so this
  // rank says so on stderr and exits 1 (mpirun then ends the others). A watchdog thread checks
  // once a second. A world of one has nothing to wait for.
  void boundWaits(double seconds);
  // A new bound for the waits that start from now on (once boundWaits started the watchdog).
  void setWaitBound(double seconds) const { wait_bound_s_ = seconds; }
  double waitBound() const { return wait_bound_s_; }
  // Waits until every rank gets here.
  void barrier() const;
  // While one lives, this rank's waits are bounded by `seconds` instead of boundWaits' bound:
  // where rank 0 writes what the others wait for (a checkpoint: its time grows with the model,
  // not a sign of a hung rank — but a rank 0 hung in it must not leave the job waiting forever).
  class LongerWaits {
   public:
    LongerWaits(const World& world, double seconds);
    ~LongerWaits();
    LongerWaits(const LongerWaits&) = delete;
    LongerWaits& operator=(const LongerWaits&) = delete;

   private:
    const World& world_;
  };
  // Ends every rank of the job now (MPI_Abort) with exit code `code`: what a rank that failed
  // does, so that no other rank waits for it, in a collective or in MPI_Finalize. A world of one
  // returns.
  void abortJob(int code) const;

  // Every rank's value, in rank order (a world of one: {mine}).
  std::vector<std::string> allgather(const std::string& mine) const;
  std::vector<int64_t> allgather(int64_t mine) const;
  std::vector<float> allgather(float mine) const;
  std::vector<std::vector<double>> allgather(const std::vector<double>& mine) const;

  // The collectives of the sharded optimizer (rank_exchange.h). Slice r of a tensor is counts[r]
  // elements at offsets[r].
  enum class Scalar { kF32, kF64, kU16, kI16 };
  // Rank r receives every rank's slice r of `data` (floats) into `received` (size() x
  // counts[r]), in rank order.
  void exchangeSlices(const float* data, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                      float* received) const;
  // The ranks a collective runs over: all of them, or this rank's peers (below).
  enum class Group { kAll, kPeers };
  // Every rank's slice of `data` (slice i: the group's rank i's), from its owner, into place on
  // every rank of the group.
  void allgatherSlices(void* data, Scalar type, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                       Group group = Group::kAll) const;
  // Rank 0 receives every rank's slice (counts[rank] elements at `mine`) into `data` at the
  // offsets; `data` is ignored on the other ranks.
  void gatherSlicesToFirst(const void* mine, Scalar type, const std::vector<int64_t>& counts,
                           const std::vector<int64_t>& offsets, void* data) const;

  // One host copy (rank_exchange.h): the ranks of a host share one copy of what they all read
  // alike (the master weights) in an MPI-3 shared-memory window (MPI_Win_allocate_shared), which
  // its local rank 0 allocates. Shared when a host runs more than one rank and every host the
  // same number (the peers below then cover every slice).
  bool sharesHostMemory() const { return shares_host_; }
  // `bytes` of memory shared by this host's ranks: the same bytes on each. Collective over the
  // host's ranks; freed when the world ends.
  std::byte* allocateShared(int64_t bytes);
  // The sum of `mine` over this host's ranks (a world of one: mine).
  int64_t sumOnHost(int64_t mine) const;
  // A barrier of this host's ranks after which each sees what the others wrote before it.
  void hostBarrier() const;
  // The ranks with this rank's local rank, one per host, in host order (world ranks): who holds,
  // on another host, the slices this rank keeps current in its host's copy (Group::kPeers).
  const std::vector<int>& peers() const { return peers_; }

 private:
  World() = default;
  // A collective of this rank waiting for the others (its MPI call's name) from construction to
  // destruction: what the watchdog times.
  class Waiting {
   public:
    Waiting(const World& world, const char* call);
    ~Waiting();

   private:
    const World& world_;
  };
  void watch();  // the watchdog thread's loop
  void findHosts();  // MPI: this rank's host, its local rank, its peers

  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool started_ = false;
  bool shares_host_ = false;
  std::vector<int> peers_{0};
  mutable std::atomic<double> wait_bound_s_{0.0};  // 0: unbounded
  mutable std::atomic<int64_t> waiting_since_ns_{0};  // 0: not waiting
  mutable std::atomic<const char*> waiting_in_{nullptr};
  mutable std::atomic<double> waiting_bound_s_{0.0};  // the current wait's bound
  mutable std::atomic<double> longer_bound_s_{0.0};   // a LongerWaits' bound (0: none)
  std::atomic<bool> stopping_{false};
  std::thread watchdog_;
};

// How many processes the launcher says it started (OpenMPI's OMPI_COMM_WORLD_SIZE, PMI's
// PMI_SIZE), 1 when none did: what a build without MPI checks.
int launchedRanks();

}  // namespace mt
