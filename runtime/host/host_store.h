// The host store: every host tensor of a plan (fp32 master weights, gradient landing buffers,
// AdamW moments, per-step inputs and the loss) in host memory, allocated once. In a plan with a
// gradient landing buffer the gradients land there (landed()): in an on-arrival plan they are
// views into it; in one that keeps them apart (gradientsKeptApart: a deferred update compiled
// for ranks) each has its own tensor, which the host optimizer fills as it lands. A split master
// (plan 1.7: a parameter with a residual) has no bytes of its own: its values are its bf16
// staging copy and residual (kernels/adamw/master_weights.h), read and written through master();
// so has a frozen weight held as bf16 alone (plan 1.32), its staging copy all of it, whose
// setParam refuses values that are not bf16.
// Sharded over data-parallel ranks (rank_exchange.h), a rank holds only its slice of each AdamW
// moment (and of each gradient kept apart): data() of such a tensor points at its slice's first
// element (f32At() indexes it by the whole tensor's elements).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/adamw/master_weights.h"
#include "runtime/host/host_memory.h"
#include "runtime/host/rank_exchange.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_format.h"
#include "runtime/io/safetensors.h"

namespace mt {

class HostStore {
 public:
  // Allocates the plan's host tensors (checkHostMemory, host_memory.h, says beforehand whether they
  // fit); throws mt::Error where the allocation fails. The plan must be verified.
  // `ranks`: the data-parallel ranks whose optimizer is sharded (each holding its slice of the
  // moments; a checkpoint's moments gathered from them on rank 0), and which may share one host
  // copy of the master weights (Shard::shared_copy: only its writer sets it whole, then
  // RankExchange::hostCopyWritten); null: one process.
  // `use`: kEvaluation leaves the optimizer's tensors (isOptimizerRole) unallocated: null, 0 bytes
  // (a plan whose loss-only run spares them only: lossRunSparesOptimizer).
  explicit HostStore(const plan::Plan& plan, RankExchange* ranks = nullptr, HostUse use = HostUse::kTraining);

  // Null for a split master (see master()).
  void* data(int index) const { return data_[index]; }
  float* f32(int index) const { return static_cast<float*>(data(index)); }
  // Element `element` (of the whole tensor) of f32 tensor `index`, which must be among the
  // elements held here (held()).
  float* f32At(int index, int64_t element) const { return f32(index) + (element - held_[index].begin); }
  // Where the device's copies of tensor `index` land (or are read from): its bytes, or, for a
  // gradient of a plan with a landing buffer, its place there.
  void* landed(int index) const { return landed_[index]; }
  // Whether the gradients are kept apart from where they land (gradientsKeptApart).
  bool gradientsApart() const { return gradients_apart_; }
  int32_t* i32(int index) const { return static_cast<int32_t*>(data(index)); }
  int64_t numel(int index) const { return numel_[index]; }
  // The elements of tensor `index` this process holds: all, or its slice of a sharded moment or
  // of a gradient kept apart.
  ShardRange held(int index) const { return held_[index]; }
  // The bytes tensor `index` holds here (0 for a split master).
  int64_t bytes(int index) const {
    return data_[index] ? held_[index].size() * dtypeBytes(plan_.host_tensors(index).dtype()) : 0;
  }
  // This process's share of the optimizer: the whole, or its rank's slices.
  Shard shard() const { return shard_; }

  // Parameters from the plan's initializers (seeded; WEIGHTS ones zero until loadParams; ROW_NORMS
  // ones from their sources' seeded values), constants from the plan, everything else zero.
  void initialize(uint64_t seed);
  // Parameters from a weights file (every parameter must be there, F32, with its shape, finite,
  // but what is new to the model whose weights they are: a reward model's score head and LoRA
  // adapters keep their seeded values, DoRA magnitudes become their weights' row norms as
  // loaded). Returns the names of those kept seeded.
  std::vector<std::string> loadParams(const SafetensorsFile& file) { return load(file, {plan::ROLE_PARAM}); }
  // Parameters (role PARAM), under their plan names, with `provenance` in the metadata.
  void saveParams(const std::string& path, const std::map<std::string, std::string>& provenance = {}) const;
  // Gradients (role GRAD), under their parameters' names. Sharded, rank 0 writes the file,
  // gathering each summed gradient from its owners: the other ranks call sendGrads() meanwhile.
  void saveGrads(const std::string& path) const;
  void sendGrads() const;
  // Parameters and AdamW moments under their plan names (a checkpoint's tensors), plus metadata.
  // Loading them refuses values that are not finite and negative second moments. Sharded, rank 0
  // writes the file, gathering the moments' slices from the other ranks as it goes: they call
  // sendState() meanwhile. Loading, each rank keeps its slice of the moments.
  void saveState(const std::string& path, const std::map<std::string, std::string>& metadata) const;
  void sendState() const;
  // (An evaluation's store, which holds no moments, loads the parameters alone.)
  void loadState(const SafetensorsFile& file) {
    const bool moments = use_ == HostUse::kTraining;
    if (!(moments ? load(file, {plan::ROLE_PARAM, plan::ROLE_MOMENT1, plan::ROLE_MOMENT2})
                  : load(file, {plan::ROLE_PARAM})).empty())
      throw Error("checkpoint " + file.path() + " holds no score head (" + kScoreHeadParam + "): it is not this "
                  "reward model's");
  }

  const std::vector<int>& params() const { return params_; }
  // The parameters that train: all but the frozen ones (mtc --frozen, --trainable).
  const std::vector<int>& trainedParams() const { return trained_params_; }
  int gradOf(int param) const { return grad_of_[param]; }
  int moment1Of(int param) const { return m1_of_[param]; }
  int moment2Of(int param) const { return m2_of_[param]; }
  // Where parameter `param`'s master weights live (plain or split) and its bf16 staging copy.
  MasterWeights master(int param) const;
  // Its master weights as floats, restored if split.
  std::vector<float> readParam(int param) const;
  int tokens() const { return tokens_; }
  int targets() const { return targets_; }
  int loss() const { return loss_; }  // -1 in a forward-only plan
  // The host tensor of the named input (ROLE_INPUT) or output (ROLE_OUTPUT), or -1.
  int input(const std::string& name) const { return find(plan::ROLE_INPUT, name); }
  // The plan's "token_mask" input (B, T) f32, the tokens the router's statistics count (1: kept;
  // all 1 until filled), or null where the plan has none.
  float* tokenMask() const;
  // The plan's "positions" input (B, T) i32 of a training plan of packed examples (each token's
  // position in its example), or null where the plan has none.
  int32_t* positions() const;
  int output(const std::string& name) const { return find(plan::ROLE_OUTPUT, name); }
  int64_t numParams() const { return num_params_; }
  int64_t numFrozen() const { return num_frozen_; }  // of numParams(), the frozen parameters' elements
  int64_t totalBytes() const { return total_bytes_; }
  // Tensor `index` as saved: fp32 under its plan name (a split master restored as it is written;
  // a sharded moment or summed gradient gathered from its owners on rank 0).
  SafetensorsTensor savedTensor(int index) const;

 private:
  int find(plan::HostRole role, const std::string& name) const;
  // Whether tensor `index` is summed or updated slice by slice over the ranks: its whole value
  // is the owners' slices (a moment, a summed gradient).
  bool ownedBySlices(int index) const;
  // Whether parameter `index` has no bytes of its own, its staging copy holding it: a split master
  // (with its residual) or a frozen weight held as bf16 alone (isSplitMaster, by the store's index).
  bool heldByStaging(int index) const { return residual_of_[index] >= 0 || plan_.host_tensors(index).bf16_only(); }
  // Tensor `index` (ownedBySlices) gathered from its owners' slices into `whole` on rank 0 (n
  // floats; null on the other ranks, which send theirs).
  void sendSlice(int index, float* whole) const;
  // Every tensor of the given roles from `file`, by its plan name (a reward model's missing score
  // head seeded: its name returned).
  std::vector<std::string> load(const SafetensorsFile& file, std::initializer_list<plan::HostRole> roles);
  // Sets parameter `param`'s master (and its staging copy) to `values(first, n, out)`, which
  // writes elements [first, first + n) into `out`; in parallel over tiles.
  void setParam(int param, const std::function<void(int64_t, int64_t, float*)>& values);
  // Each ROW_NORMS parameter `chosen` accepts from its source's values as they are now.
  void setRowNorms(const std::function<bool(int)>& chosen);
  // Throws mt::Error naming tensor `index` and its first element that is not finite (or, in a
  // second moment, negative): what a load refuses to train from (issue 18).
  void checkLoaded(int index) const;

  const plan::Plan& plan_;
  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };
  static constexpr int64_t kPageBytes = 4096;
  std::vector<std::unique_ptr<std::byte[], FreeDeleter>> tensors_;  // page-aligned; null for views
  std::vector<std::byte*> data_;  // each tensor's bytes: its own, or a view (landing gradients)
  std::vector<std::byte*> landed_;  // where the device's copies of each tensor land: data_, or the landing buffer
  bool gradients_apart_ = false;
  std::vector<int64_t> numel_;
  std::vector<ShardRange> held_;  // of each tensor, the elements held here
  RankExchange* ranks_;           // sharded over them, or null
  HostUse use_;
  Shard shard_;
  std::vector<int> params_, trained_params_, grad_of_, m1_of_, m2_of_, staging_of_, residual_of_;
  int tokens_ = -1, targets_ = -1, loss_ = -1;
  int64_t num_params_ = 0, num_frozen_ = 0, total_bytes_ = 0;
};

}  // namespace mt
