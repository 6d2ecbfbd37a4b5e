#include "runtime/plan/plan_queries.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <map>

#include "runtime/io/error.h"
#include "runtime/plan/op_table.h"

namespace mt {

namespace {

// A forward-only plan's weights, their staging copies and constants; a training plan's frozen
// weights (which no update writes), their staging copies and constants.
bool unchangingBetweenRuns(const plan::Plan& plan, int t, bool training) {
  const plan::HostRole role = plan.host_tensors(t).role();
  if (role == plan::ROLE_CONSTANT) return true;
  if (role != plan::ROLE_PARAM && role != plan::ROLE_STAGING) return false;
  return !training || isFrozenWeight(plan, t);
}

}  // namespace

std::vector<std::vector<bool>> keptCopies(const plan::Plan& plan) {
  std::vector<std::vector<bool>> kept;
  for (const auto& stream : plan.streams()) kept.emplace_back(stream.instructions_size(), false);
  const bool training = isTrainingPlan(plan);
  // Every range of arena bytes an instruction writes; candidates are the unchanging copies.
  struct Range {
    int64_t begin, end;
    int stream = -1, index = -1;  // a candidate copy's instruction
  };
  std::vector<Range> writes;
  auto bufferEnd = [&](uint32_t b, int64_t bytes) { return plan.buffers(b).offset() + bytes; };
  for (int s = 0; s < plan.streams_size(); ++s)
    for (int i = 0; i < plan.streams(s).instructions_size(); ++i) {
      const auto& in = plan.streams(s).instructions(i);
      if (in.has_kernel())
        for (uint32_t b : in.kernel().outputs()) {
          const auto& buffer = plan.buffers(b);
          writes.push_back({buffer.offset(), bufferEnd(b, checkedNumel(buffer.shape(), buffer.name()) *
                                                             dtypeBytes(buffer.dtype()))});
        }
      if (in.has_copy() && in.copy().direction() == plan::Copy::HOST_TO_DEVICE) {
        const bool candidate = unchangingBetweenRuns(plan, static_cast<int>(in.copy().host_tensor()), training);
        writes.push_back({plan.buffers(in.copy().buffer()).offset(),
                          bufferEnd(in.copy().buffer(), copyBytes(plan, in.copy())), candidate ? s : -1, i});
      }
    }
  std::sort(writes.begin(), writes.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  // Sorted by start, a range overlaps another iff an earlier one ends after its start or the
  // next one starts before its end.
  int64_t earlier_end = INT64_MIN;
  for (size_t i = 0; i < writes.size(); ++i) {
    const Range& w = writes[i];
    const bool overlaps = earlier_end > w.begin || (i + 1 < writes.size() && writes[i + 1].begin < w.end);
    if (w.stream >= 0) kept[w.stream][w.index] = !overlaps && w.end > w.begin;
    earlier_end = std::max(earlier_end, w.end);
  }
  return kept;
}

bool isFrozenWeight(const plan::Plan& plan, int t) {
  const plan::HostTensor& tensor = plan.host_tensors(t);
  if (tensor.role() == plan::ROLE_PARAM) return tensor.frozen();
  if (tensor.role() != plan::ROLE_STAGING) return false;
  // A verified plan's staging copy names its parameter; an unverified one's may not.
  const int param = tensor.param_index();
  return param >= 0 && param < plan.host_tensors_size() && plan.host_tensors(param).frozen();
}

int64_t keptCopyBytes(const plan::Plan& plan) {
  const auto kept = keptCopies(plan);
  int64_t bytes = 0;
  for (int s = 0; s < plan.streams_size(); ++s)
    for (int i = 0; i < plan.streams(s).instructions_size(); ++i)
      if (kept[s][i]) bytes += copyBytes(plan, plan.streams(s).instructions(i).copy());
  return bytes;
}

std::vector<size_t> stepLengths(const plan::Plan& plan, bool loss_only) {
  std::vector<size_t> lengths;
  for (const auto& stream : plan.streams())
    lengths.push_back(loss_only && stream.has_loss_prefix() ? stream.loss_prefix() : stream.instructions_size());
  return lengths;
}

int gradLandingTensor(const plan::Plan& plan) {
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_GRAD_LANDING) return i;
  return -1;
}

bool gradientsKeptApart(const plan::Plan& plan) {
  return gradLandingTensor(plan) >= 0 && !updatesOnArrival(planUpdateKind(plan));
}

bool updatesParameters(plan::HostTask::Kind kind) {
  return kind == plan::HostTask::ADAMW || kind == plan::HostTask::ADAMW_PREVIOUS || updatesOnArrival(kind);
}

bool updatesOnArrival(plan::HostTask::Kind kind) {
  return kind == plan::HostTask::ADAMW_ON_ARRIVAL || kind == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL;
}

plan::HostTask::Kind planUpdateKind(const plan::Plan& plan) {
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions())
      if (in.has_host_task() && updatesParameters(in.host_task().kind())) return in.host_task().kind();
  return plan::HostTask::ADAMW;
}

bool isSplitMaster(const plan::Plan& plan, int param) {
  if (plan.host_tensors(param).bf16_only()) return true;
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_RESIDUAL && t.param_index() == param) return true;
  return false;
}

std::set<int> splitMasters(const plan::Plan& plan) {
  std::set<int> split;
  for (int i = 0; i < plan.host_tensors_size(); ++i) {
    const plan::HostTensor& t = plan.host_tensors(i);
    if (t.role() == plan::ROLE_RESIDUAL) split.insert(t.param_index());
    if (t.bf16_only()) split.insert(i);
  }
  return split;
}

bool isOptimizerRole(plan::HostRole role) {
  return role == plan::ROLE_GRAD || role == plan::ROLE_GRAD_LANDING || role == plan::ROLE_MOMENT1 ||
         role == plan::ROLE_MOMENT2;
}

bool lossRunSparesOptimizer(const plan::Plan& plan) {
  const std::vector<size_t> lengths = stepLengths(plan, /*loss_only=*/true);
  for (int s = 0; s < plan.streams_size(); ++s) {
    const auto& stream = plan.streams(s);
    if (!stream.has_loss_prefix()) return false;
    for (size_t i = 0; i < lengths[s]; ++i) {
      const auto& in = stream.instructions(static_cast<int>(i));
      if (in.has_copy() && isOptimizerRole(plan.host_tensors(static_cast<int>(in.copy().host_tensor())).role()))
        return false;
      if (in.has_host_task() && in.host_task().kind() != plan::HostTask::EMBEDDING_LOOKUP &&
          in.host_task().kind() != plan::HostTask::ADAMW_PREVIOUS)
        return false;
    }
  }
  return true;
}

bool isMasterRole(plan::HostRole role) {
  return role == plan::ROLE_PARAM || role == plan::ROLE_STAGING || role == plan::ROLE_RESIDUAL;
}

int64_t unsplitHostBytes(const plan::Plan& plan, const std::function<bool(const plan::HostTensor&)>& counted) {
  const std::set<int> split = splitMasters(plan);
  int64_t bytes = 0;
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (!split.count(i) && counted(plan.host_tensors(i))) bytes += hostTensorBytes(plan.host_tensors(i));
  return bytes;
}

int64_t masterBytes(const plan::Plan& plan) {
  return unsplitHostBytes(plan, [](const plan::HostTensor& t) { return isMasterRole(t.role()); });
}

bool isLoraAdapter(const std::string& name) {
  return name.ends_with(kLoraASuffix) || name.ends_with(kLoraBSuffix) || isDoraMagnitude(name);
}

bool isDoraMagnitude(const std::string& name) { return name.ends_with(kDoraMagnitudeSuffix); }

bool takesLoraPlusRate(const plan::HostTensor& t) { return t.name().ends_with(kLoraBSuffix) || t.shape_size() == 1; }

bool isEmbeddingParam(const std::string& name) { return name == "embed.weight" || name == "wte.weight"; }

bool headIsEmbedding(const plan::Plan& plan) {
  return !hasHostTensor(plan, plan::ROLE_PARAM, "lm_head.weight") &&
         !hasScoreHead(plan);
}

bool hasScoreHead(const plan::Plan& plan) { return hasHostTensor(plan, plan::ROLE_PARAM, kScoreHeadParam); }

double loraScale(double alpha, int64_t rank, bool rslora) {
  return alpha / (rslora ? std::sqrt(static_cast<double>(rank)) : static_cast<double>(rank));
}

double modelFlopsPerToken(double params, double active, double frozen) {
  const double counted = active > 0 ? active : params;
  if (!(params > 0)) return 0.0;
  return counted * (2.0 + 4.0 * (params - frozen) / params);
}

int64_t planHostBytes(const plan::Plan& plan) {
  // An on-arrival plan's gradients are views into the landing buffer (gradientsKeptApart: not).
  const bool views = gradLandingTensor(plan) >= 0 && updatesOnArrival(planUpdateKind(plan));
  return unsplitHostBytes(plan, [views](const plan::HostTensor& t) { return !(views && t.role() == plan::ROLE_GRAD); });
}

bool hasHostTensor(const plan::Plan& plan, plan::HostRole role, const std::string& name) {
  for (const auto& t : plan.host_tensors())
    if (t.role() == role && t.name() == name) return true;
  return false;
}

bool trainsOnPairs(const plan::Plan& plan) {
  return hasHostTensor(plan, plan::ROLE_OUTPUT, kPolicyLogprobsOutput) ||
         hasHostTensor(plan, plan::ROLE_OUTPUT, kPolicyRewardsOutput);
}

bool isTrainingPlan(const plan::Plan& plan) {
  for (const auto& t : plan.host_tensors())
    if (t.role() == plan::ROLE_LOSS) return true;
  return false;
}

Tensor bufferTensor(const plan::DeviceBuffer& buffer) {
  Tensor t;
  t.shape.assign(buffer.shape().begin(), buffer.shape().end());
  t.dtype = static_cast<DType>(buffer.dtype());
  return t;
}

KernelArgs bindKernelCall(const plan::Plan& plan, const plan::KernelCall& call, std::byte* arena) {
  KernelArgs args;
  auto bind = [&](uint32_t index) {
    Tensor t = bufferTensor(plan.buffers(index));
    if (arena) t.data = arena + plan.buffers(index).offset();
    return t;
  };
  for (uint32_t b : call.inputs()) args.in.push_back(bind(b));
  for (uint32_t b : call.outputs()) args.out.push_back(bind(b));
  args.ints.assign(call.int_attrs().begin(), call.int_attrs().end());
  args.floats.assign(call.float_attrs().begin(), call.float_attrs().end());
  return args;
}

std::string cudaUnsupportedKernels(const plan::Plan& plan) {
  std::map<std::string, int> missing;  // op name (" on bf16" where only that is missing) -> calls
  for (const auto& stream : plan.streams())
    for (const auto& in : stream.instructions()) {
      if (!in.has_kernel() || in.kernel().kernel() >= kNumKernels) continue;
      const KernelInfo& info = kKernelTable[in.kernel().kernel()];
      bool bf16 = false;
      for (const auto* buffers : {&in.kernel().inputs(), &in.kernel().outputs()})
        for (uint32_t b : *buffers)
          bf16 |= b < static_cast<uint32_t>(plan.buffers_size()) && plan.buffers(b).dtype() == plan::DTYPE_BF16;
      if (!info.has_cuda)
        ++missing[std::string(info.op_name)];
      else if (bf16 && info.precision.kind == KernelPrecision::kMixed && !info.cuda_bf16)
        ++missing[std::string(info.op_name) + " on bf16"];
    }
  if (missing.empty()) return "";
  std::string list;
  for (const auto& [op, calls] : missing)
    list += (list.empty() ? "" : ", ") + op + " (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)");
  return "the CUDA backend has no kernel yet for " + list;
}

std::string planFingerprint(const plan::Plan& plan) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    h = (h ^ 0xff) * 0x100000001b3ull;
  };
  mix(std::to_string(plan.model().batch()) + "x" + std::to_string(plan.model().seq()) + "v" +
      std::to_string(plan.model().vocab()));
  for (const auto& t : plan.host_tensors()) {
    std::string shape;
    for (auto d : t.shape()) shape += std::to_string(d) + ",";
    mix(t.name() + "|" + shape + "|" + std::to_string(t.role()) + "|" + std::to_string(t.dtype()));
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ComputePrecision planPrecision(const plan::Plan& plan) {
  const std::optional<ComputePrecision> precision = parsePrecision(plan.model().precision());
  if (!precision) throw Error("the plan's precision '" + plan.model().precision() + "' is neither fp32 nor bf16");
  return *precision;
}

}  // namespace mt
