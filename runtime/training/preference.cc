#include "runtime/training/preference.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "runtime/host/host_store.h"
#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_format.h"

namespace mt {
namespace {

constexpr char kReferenceMagic[8] = {'M', 'T', 'R', 'E', 'F', 'L', 'P', '1'};
constexpr size_t kReferenceHeader = 8 + 4 + 8;  // magic, the data's checksum, the count

// The beta of the plan's mt.dpo_loss (its one float attribute), or NaN where it has none.
double planBeta(const plan::Plan& plan) {
  for (const auto& stream : plan.streams())
    for (const auto& in : stream.instructions())
      if (in.has_kernel() && in.kernel().kernel() == static_cast<uint32_t>(KernelId::DpoLoss) &&
          in.kernel().float_attrs_size() == 1)
        return in.kernel().float_attrs(0);
  return NAN;
}

}  // namespace

std::string referenceFile(const std::string& folder) { return folder + "/reference_logps.bin"; }

Preference::Preference(const plan::Plan& plan, const HostStore& store) : store_(store) {
  reference_ = store.input(kReferenceLogprobsInput);
  policy_ = store.output(kPolicyLogprobsOutput);
  if (reference_ < 0 && policy_ < 0) return;
  // Read from a plan file: hostile until checked.
  const auto rows = [&](int i) {
    const plan::HostTensor& t = plan.host_tensors(i);
    return t.dtype() == plan::DTYPE_F32 && t.shape_size() == 1 ? t.shape(0) : -1;
  };
  beta_ = planBeta(plan);
  if (reference_ < 0 || policy_ < 0 || rows(reference_) != plan.model().batch() ||
      rows(policy_) != plan.model().batch() || plan.model().batch() % 2 != 0 || !(beta_ > 0.0))
    throw Error(fmt::format("the plan's preference tensors are malformed: {} and {} must be f32 (batch) of an even "
                            "batch, beside an mt.dpo_loss with its beta (recompile the plan with mtc --objective dpo)",
                            kReferenceLogprobsInput, kPolicyLogprobsOutput));
  rows_ = plan.model().batch();
}

void Preference::computeReference(Backend& backend, HostStore& store, const BatchSampler& sampler,
                                  const StepOptions& eval, int64_t examples) {
  by_example_.assign(sampler.firstExample() + static_cast<size_t>(examples), 0.0f);
  float* reference = store.f32(reference_);
  std::fill(reference, reference + rows_, 0.0f);
  for (int64_t first = 0; first < examples; first += rows_) {
    std::vector<size_t> batch;
    for (int64_t e = first; e < std::min(examples, first + rows_); ++e) batch.push_back(sampler.firstExample() + e);
    sampler.fillExamples(batch, store.i32(store.tokens()), store.i32(store.targets()));
    const StepResult result = backend.runStep(eval);
    if (!result.corrupt_transfer.empty())
      throw Error("the reference log-probabilities: --verify-transfers: the bytes of " + result.corrupt_transfer +
                  " differ from the host's: the link or the device corrupted the copy. Check the GPU (nvidia-smi -q: "
                  "ECC errors; dmesg: Xid errors) and its link, then run again");
    for (size_t b = 0; b < batch.size(); ++b) by_example_[batch[b]] = store.f32(policy_)[b];
  }
}

void Preference::save(const std::string& path, uint32_t data_checksum) const {
  std::string bytes(kReferenceHeader + 4 * by_example_.size(), '\0');
  const uint64_t count = by_example_.size();
  std::memcpy(&bytes[0], kReferenceMagic, 8);
  std::memcpy(&bytes[8], &data_checksum, 4);
  std::memcpy(&bytes[12], &count, 8);
  std::memcpy(&bytes[kReferenceHeader], by_example_.data(), 4 * by_example_.size());
  writeFileAtomically(path, bytes);
}

void Preference::load(const std::string& path, uint32_t data_checksum, int64_t examples) {
  const std::string fix = "resume with the data the run started with, or start the run again";
  const std::string bytes = readWholeFile(path, "reference log-probabilities", "(" + fix + ")");
  uint32_t checksum = 0;
  uint64_t count = 0;
  if (bytes.size() >= kReferenceHeader) {
    std::memcpy(&checksum, &bytes[8], 4);
    std::memcpy(&count, &bytes[12], 8);
  }
  if (bytes.size() < kReferenceHeader || std::memcmp(bytes.data(), kReferenceMagic, 8) != 0 ||
      count != static_cast<uint64_t>(examples) || bytes.size() != kReferenceHeader + 4 * count)
    throw Error(path + " is not the reference log-probabilities of this data's " + std::to_string(examples) +
                " examples (" + fix + ")");
  if (checksum != data_checksum)
    throw Error(path + " holds the reference log-probabilities of other data (its checksum differs): " + fix);
  by_example_.resize(count);
  std::memcpy(by_example_.data(), &bytes[kReferenceHeader], 4 * count);
  for (size_t e = 0; e < count; ++e)
    if (!std::isfinite(by_example_[e]))
      throw Error(path + ": example " + std::to_string(e) + "'s reference log-probability is not finite (" + fix + ")");
}

void Preference::fillReference(const BatchSampler& sampler, int64_t step, int64_t first_row) const {
  float* reference = store_.f32(reference_);
  for (int64_t b = 0; b < rows_; ++b) reference[b] = by_example_.at(sampler.exampleOfRow(step, first_row + b));
}

void Preference::startStep() { pairs_ = right_ = 0, chosen_sum_ = rejected_sum_ = 0.0; }

void Preference::addRun() {
  const float *policy = store_.f32(policy_), *reference = store_.f32(reference_);
  for (int64_t p = 0; p < rows_ / 2; ++p) {
    const double chosen = beta_ * (double(policy[2 * p]) - reference[2 * p]);
    const double rejected = beta_ * (double(policy[2 * p + 1]) - reference[2 * p + 1]);
    chosen_sum_ += chosen, rejected_sum_ += rejected;
    right_ += chosen > rejected;
    ++pairs_;
  }
}

void Preference::addTo(nlohmann::json& line) const {
  if (!pairs_) return;
  const double n = static_cast<double>(pairs_);
  line["pairs_right"] = static_cast<double>(right_) / n;
  line["reward_chosen"] = chosen_sum_ / n;
  line["reward_rejected"] = rejected_sum_ / n;
  line["reward_margin"] = (chosen_sum_ - rejected_sum_) / n;
}

std::string Preference::describeStep() const {
  if (!pairs_) return "";
  return fmt::format("  chosen beats rejected {:.0f}%  margin {:.3f}", 100.0 * double(right_) / double(pairs_),
                     (chosen_sum_ - rejected_sum_) / double(pairs_));
}

}  // namespace mt
