#include "runtime/host/host_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>

#include "kernels/elementwise/elementwise.h"
#include "kernels/random/counter_rng.h"
#include "runtime/host/host_memory.h"
#include "runtime/io/error.h"
#include "runtime/io/format_bytes.h"
#include "runtime/plan/plan_format.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/initializer.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

// Parameters are initialised and loaded in tiles of this many elements, in parallel.
constexpr int64_t kTile = 1 << 16;
// Loaded tensors are checked in tiles of this many elements (on the stack), in parallel.
constexpr int64_t kCheckTile = 4096;

bool isMoment(plan::HostRole role) { return role == plan::ROLE_MOMENT1 || role == plan::ROLE_MOMENT2; }

}  // namespace

HostStore::HostStore(const plan::Plan& plan, RankExchange* ranks, HostUse use)
    : plan_(plan), ranks_(ranks), use_(use), shard_(ranks ? ranks->shard() : Shard{}) {
  const int n = plan.host_tensors_size();
  numel_.resize(n);
  held_.resize(n);
  grad_of_.assign(n, -1);
  m1_of_.assign(n, -1);
  m2_of_.assign(n, -1);
  staging_of_.assign(n, -1);
  residual_of_.assign(n, -1);
  const int landing = gradLandingTensor(plan);
  gradients_apart_ = gradientsKeptApart(plan);
  for (int i = 0; i < n; ++i) {
    const auto& t = plan.host_tensors(i);
    numel_[i] = checkedNumel(t.shape(), t.name());
    held_[i] = heldBySlices(t.role(), gradients_apart_) ? shard_.of(numel_[i], t.param_index())
                                                        : ShardRange{0, numel_[i]};
    switch (t.role()) {
      case plan::ROLE_PARAM:
        params_.push_back(i);
        num_params_ += numel_[i];
        if (t.frozen())
          num_frozen_ += numel_[i];
        else
          trained_params_.push_back(i);
        break;
      case plan::ROLE_GRAD: grad_of_[t.param_index()] = i; break;
      case plan::ROLE_MOMENT1: m1_of_[t.param_index()] = i; break;
      case plan::ROLE_MOMENT2: m2_of_[t.param_index()] = i; break;
      case plan::ROLE_STAGING: staging_of_[t.param_index()] = i; break;
      case plan::ROLE_RESIDUAL: residual_of_[t.param_index()] = i; break;
      case plan::ROLE_TOKENS: tokens_ = i; break;
      case plan::ROLE_TARGETS: targets_ = i; break;
      case plan::ROLE_LOSS: loss_ = i; break;
      default: break;
    }
  }
  total_bytes_ = shardedHostBytes(plan, shard_, use);  // checkHostMemory (host_memory.h) has said it fits
  tensors_.resize(n);
  data_.resize(n);
  // Each tensor on pages of its own: the CUDA backend pins the ones it copies (cudaHostRegister),
  // and two registrations must not share a page.
  const auto pages = [&](int i) {
    const int64_t held = held_[i].size() * dtypeBytes(plan.host_tensors(i).dtype());
    return (std::max<int64_t>(held, 1) + kPageBytes - 1) / kPageBytes * kPageBytes;
  };
  const auto allocated = [&](int i) {
    const plan::HostRole role = plan.host_tensors(i).role();
    return !(landing >= 0 && !gradients_apart_ && role == plan::ROLE_GRAD) &&
           !heldByStaging(i) &&
           (use == HostUse::kTraining || !isOptimizerRole(role));
  };
  // One host copy: the masters and their bf16 copies in the block the host's ranks share.
  std::byte* shared = nullptr;
  if (shard_.shared_copy) {
    int64_t shared_bytes = 0;
    for (int i = 0; i < n; ++i)
      if (allocated(i) && isMasterRole(plan.host_tensors(i).role())) shared_bytes += pages(i);
    shared = ranks->sharedHostMemory(shared_bytes);
  }
  try {
    for (int i = 0; i < n; ++i) {
      if (!allocated(i)) continue;
      const int64_t rounded = pages(i);
      if (shared && isMasterRole(plan.host_tensors(i).role())) {
        data_[i] = shared;
        if (shard_.writes_copy) std::memset(shared, 0, rounded);
        shared += rounded;
        continue;
      }
      tensors_[i].reset(static_cast<std::byte*>(std::aligned_alloc(kPageBytes, rounded)));
      if (!tensors_[i]) throw std::bad_alloc();
      std::memset(tensors_[i].get(), 0, rounded);
      data_[i] = tensors_[i].get();
    }
  } catch (const std::bad_alloc&) {
    tensors_.clear();
    throw Error("cannot allocate " + formatBytes(total_bytes_) + " of host memory for the plan");
  }
  // Every token kept until the data says otherwise (a consumer that fills only the tokens).
  if (float* mask = tokenMask()) std::fill(mask, mask + numel_[input(kTokenMaskInput)], 1.0f);

  // Gradients land in the landing buffer where the plan has one (the verifier checked that each
  // lies inside it); an on-arrival plan's are views there.
  landed_ = data_;
  if (landing >= 0 && data_[landing])
    for (int i = 0; i < n; ++i)
      if (plan.host_tensors(i).role() == plan::ROLE_GRAD) {
        landed_[i] = data_[landing] + plan.host_tensors(i).landing_offset();
        if (!gradients_apart_) data_[i] = landed_[i];
      }
}

void HostStore::initialize(uint64_t seed) {
  for (int i = 0; i < plan_.host_tensors_size(); ++i) {
    const auto& t = plan_.host_tensors(i);
    if (t.role() == plan::ROLE_PARAM) {
      if (t.init().kind() != plan::Initializer::ROW_NORMS)
        setParam(i, [&](int64_t first, int64_t n, float* out) { initializeTensor(out, n, t.init(), seed, t.name(), first); });
    } else if (t.role() == plan::ROLE_CONSTANT) {
      std::memcpy(data(i), t.data().data(), t.data().size());  // the verifier checked the size
    } else if (t.role() != plan::ROLE_STAGING && t.role() != plan::ROLE_RESIDUAL && data(i)) {  // the parameters' own
      std::memset(data(i), 0, bytes(i));
    }
  }
  setRowNorms([](int) { return true; });
}

void HostStore::setRowNorms(const std::function<bool(int)>& chosen) {
  if (!shard_.writes_copy) return;  // the host's writer sets its shared copy, from its own
  for (int i = 0; i < plan_.host_tensors_size(); ++i) {
    const int source = rowNormSource(plan_, plan_.host_tensors(i));
    if (source < 0 || !chosen(i)) continue;
    std::vector<float> norms(static_cast<size_t>(numel_[i]));
    initializeRowNorms(plan_.host_tensors(i), plan_.host_tensors(source), readParam(source).data(), norms.data());
    setParam(i, [&](int64_t first, int64_t n, float* out) { std::memcpy(out, norms.data() + first, 4 * n); });
  }
}

MasterWeights HostStore::master(int param) const {
  const int staging = staging_of_[param], residual = residual_of_[param];
  return {f32(param), staging >= 0 ? static_cast<uint16_t*>(data(staging)) : nullptr,
          residual >= 0 ? static_cast<int16_t*>(data(residual)) : nullptr};
}

std::vector<float> HostStore::readParam(int param) const {
  std::vector<float> values(numel_[param]);
  read_master(master(param), 0, numel_[param], values.data());
  return values;
}

void HostStore::setParam(int param, const std::function<void(int64_t, int64_t, float*)>& values) {
  if (!shard_.writes_copy) return;  // the host's writer sets its shared copy
  const MasterWeights w = master(param);
  const bool bf16_only = w.split() && !w.residual;
  const int64_t n = numel_[param], tiles = (n + kTile - 1) / kTile;
  int64_t off_bf16 = n;  // a bf16-only master's first value that is not bf16
#pragma omp parallel for schedule(static) reduction(min : off_bf16) if (tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t first = t * kTile, count = std::min(kTile, n - first);
    std::vector<float> tile;
    float* out = w.f32 ? w.f32 + first : (tile.resize(count), tile.data());
    values(first, count, out);
    bool fits = true;  // a value that is not finite is checkLoaded's to name
    if (bf16_only)
      for (int64_t e = 0; e < count && fits; ++e)
        if (std::isfinite(out[e]) && !isBf16(out[e])) off_bf16 = std::min(off_bf16, first + e), fits = false;
    if (fits) write_master(w, first, count, out);
  }
  if (off_bf16 < n)
    throw Error("parameter '" + plan_.host_tensors(param).name() + "' holds a value that is not bf16 at element " +
                std::to_string(off_bf16) + ", but the plan holds this frozen weight as bf16 alone (its Hugging Face " +
                "folder's tensor is BF16): give the weights mtc wrote beside the plan, or compile the plan with mtc " +
                "--frozen-fp32, which keeps frozen weights' fp32 masters");
}

int HostStore::find(plan::HostRole role, const std::string& name) const {
  for (int i = 0; i < plan_.host_tensors_size(); ++i)
    if (plan_.host_tensors(i).role() == role && plan_.host_tensors(i).name() == name) return i;
  return -1;
}

std::vector<std::string> HostStore::load(const SafetensorsFile& file, std::initializer_list<plan::HostRole> roles) {
  std::vector<std::string> seeded;
  for (int i = 0; i < plan_.host_tensors_size(); ++i) {
    const auto& t = plan_.host_tensors(i);
    if (std::find(roles.begin(), roles.end(), t.role()) == roles.end()) continue;
    // A Hugging Face checkpoint's file given as weights: its tensors carry transformers' names
    // (and dtypes, layouts) that mtc converts when it compiles the folder.
    if (!file.entries().count(t.name()))
      for (const char* hf : {"model.embed_tokens.weight", "transformer.wte.weight"})
        if (file.entries().count(hf))
          throw Error("weights file " + file.path() + " holds a Hugging Face checkpoint's tensors ('" + hf +
                      "'), not the plan's ('" + t.name() + "'): compile the model's folder with mtc (mtc FOLDER "
                      "-o PLAN), which converts its weights into PLAN.safetensors");
    // A reward model's score head (mtc --objective reward) and LoRA adapters (mtc --lora) are new
    // to the model whose weights these are (an --export of its training): they keep their
    // seeded initializer's values.
    if (t.role() == plan::ROLE_PARAM && (t.name() == kScoreHeadParam || isLoraAdapter(t.name())) &&
        !file.entries().count(t.name()) && t.init().kind() != plan::Initializer::WEIGHTS) {
      if (t.init().kind() != plan::Initializer::ROW_NORMS)  // after the loop: its source's values first
        setParam(i, [&](int64_t first, int64_t n, float* out) {
          initializeTensor(out, n, t.init(), plan_.init_seed(), t.name(), first);
        });
      seeded.push_back(t.name());
      continue;
    }
    const auto& entry = file.f32(t.name(), std::vector<int64_t>(t.shape().begin(), t.shape().end()));
    if (t.role() == plan::ROLE_PARAM)
      setParam(i, [&](int64_t first, int64_t n, float* out) { std::memcpy(out, entry.data + 4 * first, 4 * n); });
    else  // all of it, or this rank's slice of a sharded moment
      std::memcpy(data(i), entry.data + 4 * held_[i].begin, static_cast<size_t>(bytes(i)));
    if (t.role() != plan::ROLE_PARAM || shard_.writes_copy) checkLoaded(i);
  }
  setRowNorms([&](int i) { return std::find(seeded.begin(), seeded.end(), plan_.host_tensors(i).name()) != seeded.end(); });
  return seeded;
}

void HostStore::checkLoaded(int index) const {
  const auto& t = plan_.host_tensors(index);
  const bool second_moment = t.role() == plan::ROLE_MOMENT2;
  const int64_t n = held_[index].size(), tiles = (n + kCheckTile - 1) / kCheckTile;
  int64_t first = n;  // the first element that is not finite, or negative in a second moment
#pragma omp parallel for schedule(static) reduction(min : first) if (tiles > 1)
  for (int64_t tile = 0; tile < tiles; ++tile) {
    float values[kCheckTile];
    const int64_t begin = tile * kCheckTile, count = std::min(kCheckTile, n - begin);
    if (t.role() == plan::ROLE_PARAM)
      read_master(master(index), begin, count, values);
    else
      std::memcpy(values, f32(index) + begin, 4 * count);
    for (int64_t e = 0; e < count; ++e)
      if (!std::isfinite(values[e]) || (second_moment && values[e] < 0.0f)) {
        first = std::min(first, begin + e);
        break;
      }
  }
  if (first == n) return;
  float value;
  if (t.role() == plan::ROLE_PARAM)
    read_master(master(index), first, 1, &value);
  else
    value = f32(index)[first];
  throw Error("tensor '" + t.name() + "' holds " +
              (std::isfinite(value) ? "a negative value " + std::to_string(value) + " (an AdamW second moment)"
                                    : std::string("a value that is not finite (") + std::to_string(value) + ")") +
              " at element " + std::to_string(held_[index].begin + first) +
              ": refusing to train from it (a corrupt file, or one written from a run that diverged)");
}

SafetensorsTensor HostStore::savedTensor(int index) const {
  const auto& t = plan_.host_tensors(index);
  SafetensorsTensor out{t.name(), "F32", {t.shape().begin(), t.shape().end()}, data(index), 4 * numel_[index]};
  if (!out.data && !heldByStaging(index))
    throw Error("internal: " + t.name() + " is not held (an evaluation's store holds no optimizer state) and cannot "
                "be saved");
  if (!out.data)  // a split master (or bf16 alone), restored as it is written
    out.produce = [this, index](void* buffer) { read_master(master(index), 0, numel_[index], static_cast<float*>(buffer)); };
  else if (ownedBySlices(index))  // gathered from its owners
    out = {t.name(), "F32", {t.shape().begin(), t.shape().end()}, nullptr, 4 * numel_[index],
           [this, index](void* buffer) { sendSlice(index, static_cast<float*>(buffer)); }};
  return out;
}

bool HostStore::ownedBySlices(int index) const {
  const auto role = plan_.host_tensors(index).role();
  return ranks_ && (isMoment(role) || role == plan::ROLE_GRAD);
}

void HostStore::sendSlice(int index, float* whole) const {
  const int param = plan_.host_tensors(index).param_index();
  ranks_->gatherToFirst(f32At(index, shard_.of(numel_[index], param).begin), numel_[index], param, whole);
}

void HostStore::saveParams(const std::string& path, const std::map<std::string, std::string>& provenance) const {
  std::vector<SafetensorsTensor> out;
  std::map<std::string, std::string> metadata = provenance;
  metadata.insert({{"format", "pt"}, {"producer", "megatrain"}});
  for (int p : params_) {
    const auto& t = plan_.host_tensors(p);
    out.push_back(savedTensor(p));
    if (!t.origin().empty()) metadata[std::string(kOnnxOriginKey) + t.name()] = t.origin();
  }
  writeSafetensors(path, out, metadata);
}

void HostStore::saveGrads(const std::string& path) const {
  std::vector<SafetensorsTensor> out;
  for (int p : params_) {
    const auto& t = plan_.host_tensors(p);
    const int g = grad_of_[p];
    if (g < 0) continue;  // a parameter the plan never updates
    out.push_back(savedTensor(g));
    out.back().name = t.name();
  }
  writeSafetensors(path, out, {{"format", "pt"}, {"producer", "megatrain"}});
}

void HostStore::sendGrads() const {
  // What rank 0's saveGrads gathers, in its order.
  for (int p : params_)
    if (grad_of_[p] >= 0) sendSlice(grad_of_[p], nullptr);
}

void HostStore::saveState(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  std::vector<SafetensorsTensor> out;
  for (int i = 0; i < plan_.host_tensors_size(); ++i) {
    const auto& t = plan_.host_tensors(i);
    if (t.role() == plan::ROLE_PARAM || t.role() == plan::ROLE_MOMENT1 || t.role() == plan::ROLE_MOMENT2)
      out.push_back(savedTensor(i));
  }
  writeSafetensors(path, out, metadata);
}

void HostStore::sendState() const {
  // What rank 0's saveState gathers, in its order: the sharded moments.
  for (int i = 0; i < plan_.host_tensors_size(); ++i)
    if (isMoment(plan_.host_tensors(i).role()) && ownedBySlices(i)) sendSlice(i, nullptr);
}

int32_t* HostStore::positions() const {
  const int i = input(kPositionsInput);
  return i >= 0 && plan_.host_tensors(i).dtype() == plan::DTYPE_I32 ? i32(i) : nullptr;
}

float* HostStore::tokenMask() const {
  const int i = input(kTokenMaskInput);
  return i >= 0 && plan_.host_tensors(i).dtype() == plan::DTYPE_F32 ? f32(i) : nullptr;
}

}  // namespace mt
