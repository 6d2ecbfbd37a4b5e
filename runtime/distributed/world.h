// Data parallel over ranks that mpirun launches (DESIGN.md §13; docs/distributed.md): which rank
// this process is, how many run, and the few collectives the trainer needs. MPI (OpenMPI from
// Debian) is the engine; without it (a build without libopenmpi-dev, or a plain `mtrun`) the
// world is one rank and nothing here talks to anyone.
#pragma once
#include <cstdint>
#include <string>
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
  ~World();  // MPI_Finalize, when started

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's index among the ranks of its host (picks its GPU), and how many share the host.
  int localRank() const { return local_rank_; }
  int localSize() const { return local_size_; }
  bool distributed() const { return size_ > 1; }

  // Every rank's value, in rank order (a world of one: {mine}).
  std::vector<std::string> allgather(const std::string& mine) const;
  std::vector<int64_t> allgather(int64_t mine) const;
  std::vector<float> allgather(float mine) const;
  std::vector<std::vector<double>> allgather(const std::vector<double>& mine) const;

  // The sum of each float array over the ranks: `data` (n) of rank r goes to the ranks in the
  // slices they own; the MPI calls behind the gradient exchange (gradient_exchange.h).
  // Rank r receives every rank's slice r (of `counts`/`offsets`) into `received` (size x
  // counts[r]), rank order.
  void exchangeSlices(const float* data, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                      float* received) const;
  // Every rank's slice (its counts[r] floats at `mine`) gathered into `data` at the offsets.
  void gatherSlices(const float* mine, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                    float* data) const;

 private:
  World() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool started_ = false;
};

// How many processes the launcher says it started (OpenMPI's OMPI_COMM_WORLD_SIZE, PMI's
// PMI_SIZE), 1 when none did: what a build without MPI checks.
int launchedRanks();

}  // namespace mt
