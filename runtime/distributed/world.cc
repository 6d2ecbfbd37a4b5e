#include "runtime/distributed/world.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/io/error.h"

#ifdef MT_MPI_ENABLED
// MPI's C API only: without these, OpenMPI's and MPICH's headers drag in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace mt {
namespace {

World* g_world = nullptr;

int envInt(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : 0;
}

#ifdef MT_MPI_ENABLED
MPI_Comm g_comm = MPI_COMM_NULL;  // MPI_COMM_WORLD's duplicate: the trainer's collectives
MPI_Comm g_host = MPI_COMM_NULL;  // the ranks of this host
MPI_Comm g_peers = MPI_COMM_NULL;  // the ranks with this rank's local rank, one per host
std::vector<MPI_Win> g_windows;    // the shared blocks (freed before MPI_Finalize)

// An MPI call that failed (the default handler is replaced by MPI_ERRORS_RETURN): a rank that
// cannot talk to the others stops, and mpirun ends the job.
void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(std::string("MPI: ") + what + " failed: " + std::string(text, static_cast<size_t>(length)));
}

// MPI's counts and displacements are int (OpenMPI 4 has no large-count calls).
std::vector<int> ints(const std::vector<int64_t>& values) {
  for (int64_t v : values)
    if (v > std::numeric_limits<int>::max())
      throw Error("data parallel: a tensor of more than 2^31 - 1 elements (" + std::to_string(v) +
                  " at an offset) cannot be exchanged between ranks yet (MPI counts are int): train it in one process");
  return std::vector<int>(values.begin(), values.end());
}

MPI_Datatype mpiType(World::Scalar type) {
  switch (type) {
    case World::Scalar::kF32: return MPI_FLOAT;
    case World::Scalar::kF64: return MPI_DOUBLE;
    case World::Scalar::kU16: return MPI_UINT16_T;
    case World::Scalar::kI16: return MPI_INT16_T;
  }
  return MPI_BYTE;
}
#endif

size_t scalarBytes(World::Scalar type) {
  return type == World::Scalar::kF64 ? 8 : type == World::Scalar::kF32 ? 4 : 2;
}

}  // namespace

int launchedRanks() {
  const int ompi = envInt("OMPI_COMM_WORLD_SIZE"), pmi = envInt("PMI_SIZE");
  return ompi > 1 ? ompi : pmi > 1 ? pmi : 1;
}

World& World::start(int* argc, char*** argv) {
  static World world;
  g_world = &world;
#ifdef MT_MPI_ENABLED
  if (launchedRanks() > 1) {
    // The host stream's thread exchanges gradients while the main thread waits for the step:
    // one thread at a time calls MPI.
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    world.started_ = true;
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error("MPI gives no thread support (MPI_THREAD_SERIALIZED): the host optimizer's thread cannot exchange "
                  "gradients; use an MPI built with threads (Debian's OpenMPI is)");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(MPI_Comm_rank(g_comm, &world.rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(g_comm, &world.size_), "MPI_Comm_size");
    world.findHosts();
  }
#else
  (void)argc, (void)argv;
  if (const int ranks = launchedRanks(); ranks > 1)
    throw Error("mpirun started " + std::to_string(ranks) +
                " ranks, but this mtrun was built without MPI: each would train alone. Install OpenMPI "
                "(bash tools/setup.sh: openmpi-bin libopenmpi-dev) and rebuild, or run one process");
#endif
  return world;
}

#ifdef MT_MPI_ENABLED
void World::findHosts() {
  // MT_RANKS_PER_HOST=K takes every K consecutive ranks for a host of their own (tests of several
  // hosts on one machine); by default a host is the ranks that can share memory.
  if (const int per_host = envInt("MT_RANKS_PER_HOST"); per_host > 0)
    check(MPI_Comm_split(g_comm, rank_ / per_host, rank_, &g_host), "MPI_Comm_split (host)");
  else
    check(MPI_Comm_split_type(g_comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &g_host), "MPI_Comm_split_type");
  check(MPI_Comm_rank(g_host, &local_rank_), "MPI_Comm_rank (host)");
  check(MPI_Comm_size(g_host, &local_size_), "MPI_Comm_size (host)");
  check(MPI_Comm_split(g_comm, local_rank_, rank_, &g_peers), "MPI_Comm_split (peers)");
  int peer_count = 0;
  check(MPI_Comm_size(g_peers, &peer_count), "MPI_Comm_size (peers)");
  peers_.assign(static_cast<size_t>(peer_count), 0);
  check(MPI_Allgather(&rank_, 1, MPI_INT, peers_.data(), 1, MPI_INT, g_peers), "MPI_Allgather (peers)");
  std::vector<int> local_sizes(static_cast<size_t>(size_));
  check(MPI_Allgather(&local_size_, 1, MPI_INT, local_sizes.data(), 1, MPI_INT, g_comm), "MPI_Allgather (hosts)");
  shares_host_ = local_size_ > 1 && std::all_of(local_sizes.begin(), local_sizes.end(),
                                                [&](int n) { return n == local_size_; });
}
#endif

std::byte* World::allocateShared(int64_t bytes) {
#ifdef MT_MPI_ENABLED
  if (shares_host_) {
    MPI_Win window = MPI_WIN_NULL;
    void* mine = nullptr;
    check(MPI_Win_allocate_shared(local_rank_ == 0 ? static_cast<MPI_Aint>(bytes) : 0, 1, MPI_INFO_NULL, g_host, &mine,
                                  &window),
          "MPI_Win_allocate_shared");
    g_windows.push_back(window);
    MPI_Aint size = 0;
    int unit = 0;
    void* base = nullptr;
    check(MPI_Win_shared_query(window, 0, &size, &unit, &base), "MPI_Win_shared_query");
    // One passive epoch for the window's life: MPI_Win_sync then orders the ranks' loads and stores.
    check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window), "MPI_Win_lock_all");
    return static_cast<std::byte*>(base);
  }
#endif
  (void)bytes;
  throw Error("internal: shared host memory asked for where the host's ranks do not share it");
}

int64_t World::sumOnHost(int64_t mine) const {
#ifdef MT_MPI_ENABLED
  if (size_ > 1) {
    int64_t sum = 0;
    const Waiting waiting(*this, "MPI_Allreduce (the host's ranks)");
    check(MPI_Allreduce(&mine, &sum, 1, MPI_INT64_T, MPI_SUM, g_host), "MPI_Allreduce (host)");
    return sum;
  }
#endif
  return mine;
}

void World::hostBarrier() const {
#ifdef MT_MPI_ENABLED
  if (!shares_host_) return;
  for (MPI_Win w : g_windows) check(MPI_Win_sync(w), "MPI_Win_sync");
  {
    const Waiting waiting(*this, "MPI_Barrier (the host's ranks)");
    check(MPI_Barrier(g_host), "MPI_Barrier (host)");
  }
  for (MPI_Win w : g_windows) check(MPI_Win_sync(w), "MPI_Win_sync");
#endif
}

World& World::get() {
  static World alone;
  return g_world ? *g_world : alone;
}

World::~World() {
#ifdef MT_MPI_ENABLED
  if (started_) {
    // Freeing the windows and finalizing wait for every rank: watched like any collective, so a
    // rank hung at the end does not leave the others waiting forever.
    const Waiting waiting(*this, "MPI_Finalize");
    for (MPI_Win& window : g_windows) {
      MPI_Win_unlock_all(window);
      MPI_Win_free(&window);
    }
    for (MPI_Comm* comm : {&g_peers, &g_host, &g_comm})
      if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
    MPI_Finalize();
  }
#endif
  stopping_ = true;
  if (watchdog_.joinable()) watchdog_.join();
}

namespace {
int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

World::Waiting::Waiting(const World& world, const char* call) : world_(world) {
  world_.waiting_in_ = call;
  world_.waiting_bound_s_ = std::max(world.wait_bound_s_.load(), world.longer_bound_s_.load());
  world_.waiting_since_ns_ = nowNs();
}
World::Waiting::~Waiting() { world_.waiting_since_ns_ = 0; }

void World::boundWaits(double seconds) {
  if (size_ == 1 || seconds <= 0 || watchdog_.joinable()) return;
  wait_bound_s_ = seconds;
  watchdog_ = std::thread([this] { watch(); });
}

void World::watch() {
  while (!stopping_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t since = waiting_since_ns_;
    const double bound = waiting_bound_s_;
    // A wait that ended and another that began between the two reads: the bound may be the new
    // one's, the start the old one's; the next look sees them together.
    if (since == 0 || since != waiting_since_ns_ || static_cast<double>(nowNs() - since) * 1e-9 <= bound) continue;
    std::fprintf(stderr,
                 "mtrun (rank %d): waited %.0f s in %s for the other ranks: one of them hung, was stopped or lost "
                 "its host; ending the job (mtrun --rank-timeout bounds this wait%s; rank 0's last checkpoint, if it "
                 "wrote any, is intact)\n",
                 rank_, bound, waiting_in_.load(),
                 bound > wait_bound_s_ ? ", with the time rank 0's checkpoint may take to write" : "");
    std::fflush(nullptr);
    std::_Exit(1);  // mpirun ends the other ranks
  }
}

void World::abortJob(int code) const {
#ifdef MT_MPI_ENABLED
  if (started_ && size_ > 1) {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#else
  (void)code;
#endif
}

void World::barrier() const {
#ifdef MT_MPI_ENABLED
  if (size_ == 1) return;
  const Waiting waiting(*this, "MPI_Barrier");
  check(MPI_Barrier(g_comm), "MPI_Barrier");
#endif
}

World::LongerWaits::LongerWaits(const World& world, double seconds) : world_(world) {
  world_.longer_bound_s_ = seconds;
}
World::LongerWaits::~LongerWaits() { world_.longer_bound_s_ = 0.0; }

std::vector<std::string> World::allgather(const std::string& mine) const {
  if (size_ == 1) return {mine};
#ifdef MT_MPI_ENABLED
  const std::vector<int64_t> lengths = allgather(static_cast<int64_t>(mine.size()));
  std::vector<int> counts(lengths.begin(), lengths.end()), displs(static_cast<size_t>(size_));
  int total = 0;
  for (int r = 0; r < size_; ++r) displs[r] = total, total += counts[r];
  std::string all(static_cast<size_t>(total), '\0');
  const Waiting waiting(*this, "MPI_Allgatherv");
  check(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), counts.data(), displs.data(),
                       MPI_CHAR, g_comm),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(counts[r])));
  return out;
#else
  return {mine};
#endif
}

std::vector<int64_t> World::allgather(int64_t mine) const {
  std::vector<int64_t> out(static_cast<size_t>(size_), mine);
#ifdef MT_MPI_ENABLED
  if (size_ > 1) {
    const Waiting waiting(*this, "MPI_Allgather");
    check(MPI_Allgather(&mine, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, g_comm), "MPI_Allgather");
  }
#endif
  return out;
}

std::vector<float> World::allgather(float mine) const {
  std::vector<float> out(static_cast<size_t>(size_), mine);
#ifdef MT_MPI_ENABLED
  if (size_ > 1) {
    const Waiting waiting(*this, "MPI_Allgather");
    check(MPI_Allgather(&mine, 1, MPI_FLOAT, out.data(), 1, MPI_FLOAT, g_comm), "MPI_Allgather");
  }
#endif
  return out;
}

std::vector<std::vector<double>> World::allgather(const std::vector<double>& mine) const {
  const std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
  std::vector<std::vector<double>> out;
  for (const std::string& theirs : allgather(bytes)) {
    out.emplace_back(theirs.size() / sizeof(double));
    std::memcpy(out.back().data(), theirs.data(), out.back().size() * sizeof(double));
  }
  return out;
}

void World::exchangeSlices(const float* data, const std::vector<int64_t>& counts, const std::vector<int64_t>& offsets,
                           float* received) const {
#ifdef MT_MPI_ENABLED
  const std::vector<int> send_counts = ints(counts), send_displs = ints(offsets);
  std::vector<int> recv_counts(static_cast<size_t>(size_), send_counts[rank_]), recv_displs(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) recv_displs[r] = r * send_counts[rank_];
  const Waiting waiting(*this, "MPI_Alltoallv (a gradient's slices)");
  check(MPI_Alltoallv(data, send_counts.data(), send_displs.data(), MPI_FLOAT, received, recv_counts.data(),
                      recv_displs.data(), MPI_FLOAT, g_comm),
        "MPI_Alltoallv");
#else
  std::memcpy(received, data + offsets[0], static_cast<size_t>(counts[0]) * sizeof(float));
#endif
}

void World::allgatherSlices(void* data, Scalar type, const std::vector<int64_t>& counts,
                            const std::vector<int64_t>& offsets, Group group) const {
#ifdef MT_MPI_ENABLED
  const bool peers = group == Group::kPeers;
  if ((peers ? static_cast<int>(peers_.size()) : size_) == 1) return;  // every slice is here
  const std::vector<int> recv_counts = ints(counts), recv_displs = ints(offsets);
  const Waiting waiting(*this, peers ? "MPI_Allgatherv (the peers' slices)" : "MPI_Allgatherv (the ranks' slices)");
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, recv_counts.data(), recv_displs.data(),
                       mpiType(type), peers ? g_peers : g_comm),
        "MPI_Allgatherv");
#else
  (void)data, (void)type, (void)counts, (void)offsets, (void)group;  // a world of one holds every slice
#endif
}

void World::gatherSlicesToFirst(const void* mine, Scalar type, const std::vector<int64_t>& counts,
                                const std::vector<int64_t>& offsets, void* data) const {
#ifdef MT_MPI_ENABLED
  if (size_ > 1) {
    const std::vector<int> recv_counts = ints(counts), recv_displs = ints(offsets);
    const Waiting waiting(*this, "MPI_Gatherv (the ranks' slices for rank 0)");
    check(MPI_Gatherv(mine, recv_counts[rank_], mpiType(type), data, recv_counts.data(), recv_displs.data(),
                      mpiType(type), 0, g_comm),
          "MPI_Gatherv");
    return;
  }
#endif
  std::memcpy(static_cast<std::byte*>(data) + offsets[0] * scalarBytes(type), mine, counts[0] * scalarBytes(type));
}

}  // namespace mt
