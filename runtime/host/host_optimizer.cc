#include "runtime/host/host_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/embedding/embedding.h"
#include "runtime/io/error.h"
#include "runtime/plan/plan_queries.h"

namespace mt {

HostOptimizer::HostOptimizer(const plan::Plan& plan, HostStore& store)
    : plan_(plan),
      store_(store),
      deferred_(planUpdateKind(plan) == plan::HostTask::ADAMW_PREVIOUS),
      on_arrival_(updatesOnArrival(planUpdateKind(plan))) {
  std::vector<bool> seen(plan.host_tensors_size(), false);
  for (const auto& s : plan.streams())
    for (const auto& in : s.instructions()) {
      if (!in.has_host_task()) continue;
      const auto& task = in.host_task();
      for (uint32_t t : task.tensors()) {
        if (task.kind() == plan::HostTask::GRAD_NORM) seen[t] = true;
        if (task.kind() == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL) seen[store.gradOf(static_cast<int>(t))] = true;
      }
    }
  for (int i = 0; i < plan.host_tensors_size() && unseen_grad_ < 0; ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_GRAD && !seen[i]) unseen_grad_ = i;
}

void HostOptimizer::beginStep(const StepOptions& options) {
  if (on_arrival_ && options.grad_clip > 0.0)
    throw Error("this plan updates each parameter as its gradient lands, before the global norm is known: "
                "it cannot clip by the global norm (use --grad-clip 0, or compile with mtc --update deferred)");
  if (options.micro_steps < 1 || options.micro_step < 0 || options.micro_step >= options.micro_steps)
    throw Error("micro-batch " + std::to_string(options.micro_step) + " of " + std::to_string(options.micro_steps) +
                ": not a micro-batch of an accumulated step");
  // Summed on the host (over micro-batches or ranks), or kept apart from where it lands: the host
  // task that takes a gradient's norm does either, so every gradient needs one.
  if ((options.micro_steps > 1 || options.exchange || store_.gradientsApart()) && unseen_grad_ >= 0)
    throw Error(std::string(options.exchange             ? "data parallel: "
                            : options.micro_steps > 1    ? "gradient accumulation: "
                                                         : "a plan that keeps gradients apart: ") +
                "the host never sees the gradient '" + plan_.host_tensors(unseen_grad_).name() +
                "' land (no host task takes its norm), so it cannot sum it or keep it; " +
                (options.exchange           ? "train in one process"
                 : options.micro_steps > 1 ? "train without --accumulate"
                                           : "recompile the model with mtc"));
  if (options.exchange && store_.shard().ranks != options.exchange->shard().ranks)
    throw Error("internal: the host store is not sharded over the ranks that exchange its gradients");
  options_ = options;
  grad_sq_sums_.assign(static_cast<size_t>(plan_.host_tensors_size()), 0.0);
  first_nonfinite_ = -1;
  updated_ = false;
}

void HostOptimizer::run(plan::HostTask::Kind kind, const std::vector<int>& tensors, bool accumulate,
                        int64_t padding_id) {
  // The token embedding runs whatever the update does: the step's forward and gradient need it.
  if (kind == plan::HostTask::EMBEDDING_LOOKUP) {
    const auto& table = plan_.host_tensors(tensors[2]);
    embedding_lookup_host(hostTensor(tensors[1]), store_.master(tensors[2]), table.shape(0), hostTensor(tensors[0]));
    return;
  }
  if (kind == plan::HostTask::EMBEDDING_GRAD) {
    embedding_grad_host(hostTensor(tensors[1]), hostTensor(tensors[2]), hostTensor(tensors[0]), accumulate,
                        padding_id);
    return;
  }
  if (kind == plan::HostTask::GRAD_NORM) {
    addNorms(tensors);
    return;
  }
  if (kind == plan::HostTask::ADAMW_PREVIOUS) {
    if (pending_) update(tensors, pending_adamw_);
    return;
  }
  if (kind == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL) {
    normAndUpdate(tensors);
    return;
  }
  if (first_nonfinite_ >= 0) return;  // NaN/Inf gradients would poison the weights: no update
  if (!options_.update || !gradientsComplete()) return;
  if (kind == plan::HostTask::ADAMW_ON_ARRIVAL) {
    update(tensors, options_.adamw);  // no clipping: the norm is not complete yet
    updated_ = true;
    return;
  }
  update(tensors, stepAdamW());
}

StepResult HostOptimizer::endStep(bool discard) {
  StepResult result;
  if (store_.loss() >= 0) result.loss = store_.f32(store_.loss())[0];
  result.grad_norm = std::sqrt(gradSqSum());
  if (first_nonfinite_ >= 0) result.nonfinite_grad = plan_.host_tensors(first_nonfinite_).name();
  // Several ranks decide alike: a loss not finite, or a discarded run, on any rank is every
  // rank's (each training run of the plan reaches here on every rank; a validation's need not).
  bool sound = std::isfinite(result.loss) && !discard;
  if (options_.exchange && options_.update) sound = options_.exchange->everyRank(sound);
  result.partially_updated = updated_ && (!sound || first_nonfinite_ >= 0);
  // The previous pending update ran at the start of this step; this step's is pending now,
  // unless it is not to be applied (NaN/Inf gradients or loss, a discarded step, or no update
  // asked for).
  pending_ = deferred_ && options_.update && gradientsComplete() && first_nonfinite_ < 0 && sound;
  if (pending_) pending_adamw_ = stepAdamW();
  return result;
}

void HostOptimizer::applyPending() {
  if (!pending_) return;
  update(store_.trainedParams(), pending_adamw_);
  pending_ = false;
}

AdamWParams HostOptimizer::stepAdamW() const {
  AdamWParams p = options_.adamw;
  if (options_.grad_clip > 0.0) {
    // torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6), clamped to 1.
    const double coeff = options_.grad_clip / (std::sqrt(gradSqSum()) + 1e-6);
    p.grad_scale = static_cast<float>(std::min(coeff, 1.0));
  }
  return p;
}

void HostOptimizer::normAndUpdate(const std::vector<int>& params) {
  for (int param : params) {
    const int grad = store_.gradOf(param);
    if (!foldGradient(grad)) continue;
    if (first_nonfinite_ >= 0 || !options_.update) {  // the norm only: no update runs now
      addNorm(grad, gradSumSquares(grad));
      continue;
    }
    // No clipping: the norm is not complete yet.
    const int64_t n = store_.numel(param);
    const ShardRange mine = owned(n, param);
    chunk_sums_.resize(static_cast<size_t>(adamw_chunks(mine.size())));
    adamw_with_norm_chunks_cpu(store_.master(param).from(mine.begin), store_.f32At(grad, mine.begin),
                               store_.f32(store_.moment1Of(param)), store_.f32(store_.moment2Of(param)), mine.size(),
                               forParam(param, options_.adamw), chunk_sums_.data());
    updated_ = true;
    if (!options_.exchange) {
      addNorm(grad, sum_of_chunks(chunk_sums_.data(), adamw_chunks(n)));
      continue;
    }
    const double sum = gatheredSum(n, param);
    options_.exchange->gatherMaster(store_.master(param), n, param);
    addNorm(grad, sum);
  }
}

bool HostOptimizer::foldGradient(int grad) {
  float* landed = static_cast<float*>(store_.landed(grad));
  const int64_t n = store_.numel(grad);
  if (options_.exchange) {  // the ranks' gradients summed in micro-batch order, as --accumulate's
    options_.exchange->reduceToOwner(landed, n, plan_.host_tensors(grad).param_index());
  } else if (options_.micro_steps > 1) {
    if (grad_sums_.empty()) grad_sums_.resize(plan_.host_tensors_size());
    std::vector<float>& sum = grad_sums_[grad];
    if (sum.empty()) sum.resize(n);  // once, the first time it lands; checkHostMemory counted it
    accumulate_gradient_cpu(sum.data(), landed, n, options_.micro_step, options_.micro_steps, options_.micro_weight,
                            options_.step_divisor);
  }
  if (!gradientsComplete()) return false;
  // Kept apart: the summed gradient (this rank's slice of it) out of the landing buffer, whose
  // bytes the next gradients land in.
  if (store_.gradientsApart())
    std::memcpy(store_.f32(grad), landed + store_.held(grad).begin, static_cast<size_t>(store_.bytes(grad)));
  return true;
}

Tensor HostOptimizer::hostTensor(int index) const {
  const auto& t = plan_.host_tensors(index);
  return Tensor{store_.landed(index), {t.shape().begin(), t.shape().end()}, static_cast<DType>(t.dtype())};
}

ShardRange HostOptimizer::owned(int64_t n, int param) const {
  return options_.exchange ? options_.exchange->shard().of(n, param) : ShardRange{0, n};
}

double HostOptimizer::gradSumSquares(int grad) {
  const int64_t n = store_.numel(grad);
  if (!options_.exchange) return sum_squares_cpu(store_.f32(grad), n);
  const int param = plan_.host_tensors(grad).param_index();
  const ShardRange mine = owned(n, param);
  chunk_sums_.resize(static_cast<size_t>(adamw_chunks(mine.size())));
  sum_squares_chunks_cpu(store_.f32At(grad, mine.begin), mine.size(), chunk_sums_.data());
  return gatheredSum(n, param);
}

void HostOptimizer::addNorms(const std::vector<int>& grads) {
  std::vector<int> folded;
  for (int g : grads)
    if (foldGradient(g)) folded.push_back(g);
  if (options_.exchange) {  // each rank sums its chunks, gathered tensor by tensor
    for (int g : folded) addNorm(g, gradSumSquares(g));
    return;
  }
  // Every gradient's chunks over the threads at once, then each one's sum in order: the values
  // and the order of the sums one tensor at a time, so the norm's bits stay.
  std::vector<const float*> arrays;
  std::vector<int64_t> sizes;
  int64_t chunks = 0;
  for (int g : folded) {
    arrays.push_back(store_.f32(g));
    sizes.push_back(store_.numel(g));
    chunks += adamw_chunks(sizes.back());
  }
  chunk_sums_.resize(static_cast<size_t>(chunks));
  sum_squares_chunks_many_cpu(arrays, sizes, chunk_sums_.data());
  const double* partials = chunk_sums_.data();
  for (size_t i = 0; i < folded.size(); ++i) {
    addNorm(folded[i], sum_of_chunks(partials, adamw_chunks(sizes[i])));
    partials += adamw_chunks(sizes[i]);
  }
}

double HostOptimizer::gatheredSum(int64_t n, int param) {
  all_chunk_sums_.resize(static_cast<size_t>(adamw_chunks(n)));
  options_.exchange->gatherChunkSums(chunk_sums_.data(), n, param, all_chunk_sums_.data());
  return sum_of_chunks(all_chunk_sums_.data(), adamw_chunks(n));
}

void HostOptimizer::addNorm(int grad, double sum_squares) {
  if (!std::isfinite(sum_squares) && first_nonfinite_ < 0) first_nonfinite_ = grad;
  grad_sq_sums_[static_cast<size_t>(grad)] += sum_squares;
}

double HostOptimizer::gradSqSum() const {
  double sum = 0.0;
  for (double s : grad_sq_sums_) sum += s;
  return sum;
}

AdamWParams HostOptimizer::forParam(int param, const AdamWParams& adamw) const {
  AdamWParams q = adamw;
  const plan::HostTensor& t = plan_.host_tensors(param);
  if (!t.weight_decay()) q.weight_decay = 0.0;
  if (options_.lora_plus_ratio != 1.0 && takesLoraPlusRate(t)) q.lr *= options_.lora_plus_ratio;
  return q;
}

// Sharded: each rank updates its slice (its moments are that slice alone), then the updated
// slices are gathered into every rank's master.
void HostOptimizer::update(const std::vector<int>& params, const AdamWParams& adamw) {
  for (int param : params) {
    const int64_t n = store_.numel(param);
    const ShardRange mine = owned(n, param);
    adamw_cpu(store_.master(param).from(mine.begin), store_.f32At(store_.gradOf(param), mine.begin),
              store_.f32(store_.moment1Of(param)), store_.f32(store_.moment2Of(param)), mine.size(),
              forParam(param, adamw));
    if (options_.exchange) options_.exchange->gatherMaster(store_.master(param), n, param);
  }
}

}  // namespace mt
