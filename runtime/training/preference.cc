#include "runtime/training/preference.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/loss/loss.h"
#include "runtime/distributed/world.h"
#include "runtime/host/host_store.h"
#include "runtime/io/error.h"
#include "runtime/io/mapped_file.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_format.h"

namespace mt {
namespace {

constexpr char kReferenceMagic[8] = {'M', 'T', 'R', 'E', 'F', 'L', 'P', '2'};
// The magic, the data's checksum, the plan's sequence length, the first example, the count.
constexpr size_t kReferenceHeader = 8 + 4 + 4 + 8 + 8;

// The length of a plan's host tensor `i` where it is a vector of `dtype`, else -1 (read from a plan
// file: hostile until checked).
int64_t vectorLength(const plan::Plan& plan, int i, plan::DType dtype = plan::DTYPE_F32) {
  if (i < 0 || i >= plan.host_tensors_size()) return -1;
  const plan::HostTensor& t = plan.host_tensors(i);
  return t.dtype() == dtype && t.shape_size() == 1 ? t.shape(0) : -1;
}

// The plan's first call of kernel `id` (mt.dpo_loss: the loss, beta, the label smoothing;
// mt.pair_nll: the NLL term), or null.
const plan::KernelCall* firstCall(const plan::Plan& plan, KernelId id) {
  for (const auto& stream : plan.streams())
    for (const auto& in : stream.instructions())
      if (in.has_kernel() && in.kernel().kernel() == static_cast<uint32_t>(id)) return &in.kernel();
  return nullptr;
}

}  // namespace

std::string referenceFile(const std::string& folder, bool held_out) {
  return folder + (held_out ? "/reference_logps.val.bin" : "/reference_logps.bin");
}

void PairScores::add(const PairScores& o) {
  loss += o.loss, pairs += o.pairs, right += o.right, chosen += o.chosen, rejected += o.rejected;
  logp_chosen += o.logp_chosen, logp_rejected += o.logp_rejected;
  nll += o.nll, nll_tokens += o.nll_tokens;
  log_odds += o.log_odds, odds_pairs += o.odds_pairs;
  chosen_count += o.chosen_count, rejected_count += o.rejected_count;
  kl += o.kl, kl_runs += o.kl_runs;
}

Preference::Preference(const plan::Plan& plan, const HostStore& store) : store_(store) {
  reference_ = store.input(kReferenceLogprobsInput);
  policy_ = store.output(kPolicyLogprobsOutput);
  const int rewards = store.output(kPolicyRewardsOutput);
  if (reference_ < 0 && policy_ < 0 && rewards < 0) return;
  rows_ = plan.model().batch();
  seq_ = plan.model().seq();
  if (rewards >= 0) {
    policy_ = rewards;
    readReward(plan);
    return;
  }
  if (const plan::KernelCall* kto = firstCall(plan, KernelId::KtoLoss)) {
    readKto(plan, *kto);
    return;
  }
  const plan::KernelCall* loss = firstCall(plan, KernelId::DpoLoss);
  const bool reference_free = loss && loss->int_attrs_size() == 1 && loss->int_attrs(0) >= 0 &&
                    loss->int_attrs(0) < kDpoLossKinds && dpoReferenceFree(DpoLossKind(loss->int_attrs(0)));
  // The call's attributes were checked with the plan (dpo_loss_check): a kind, beta > 0, a
  // smoothing, SimPO's gamma or DiscoPOP's tau. A labels input is KTO's alone.
  if ((reference_ < 0) != reference_free || policy_ < 0 ||
      (!reference_free && vectorLength(plan, reference_) != rows_) || vectorLength(plan, policy_) != rows_ ||
      rows_ % 2 != 0 || store.input(kKtoLabelsInput) >= 0 || !loss ||
      loss->int_attrs_size() != 1 || loss->float_attrs_size() < 2 || loss->float_attrs_size() > 3)
    throw Error(fmt::format("the plan's preference tensors are malformed: {} (but SimPO's and ORPO's) and {} must be f32 (batch) "
                            "of an even batch, beside an mt.dpo_loss and no {} input (recompile the plan with mtc "
                            "--objective dpo)",
                            kReferenceLogprobsInput, kPolicyLogprobsOutput, kKtoLabelsInput));
  loss_ = dpoLossParams(loss->int_attrs(0), loss->float_attrs().data(), static_cast<size_t>(loss->float_attrs_size()));
  // Its attributes were checked with the plan (pair_nll_check): int[vocab, average] float[alpha].
  if (const plan::KernelCall* nll = firstCall(plan, KernelId::PairNll))
    nll_ = NllTerm{nll->float_attrs(0), nll->int_attrs(0), nll->int_attrs(1) == 1};
  zeros_.assign(static_cast<size_t>(plan.model().batch()), 0.0f);
}

void Preference::readKto(const plan::Plan& plan, const plan::KernelCall& loss) {
  kind_ = PairLoss::kKto;
  labels_ = store_.input(kKtoLabelsInput);
  // The call's attributes were checked with the plan (kto_loss_check).
  if (rows_ % 2 != 0 || vectorLength(plan, reference_) != rows_ || vectorLength(plan, policy_) != rows_ ||
      vectorLength(plan, labels_) != rows_ / 2 || loss.float_attrs_size() != 3 || firstCall(plan, KernelId::DpoLoss))
    throw Error(fmt::format("the plan's KTO tensors are malformed: {} and {} must be f32 (batch) of an even batch and "
                            "{} f32 (batch / 2), beside an mt.kto_loss and no mt.dpo_loss (recompile the plan with mtc "
                            "--objective kto)",
                            kReferenceLogprobsInput, kPolicyLogprobsOutput, kKtoLabelsInput));
  kto_ = KtoParams{loss.float_attrs(0), loss.float_attrs(1), loss.float_attrs(2)};
}

void Preference::readReward(const plan::Plan& plan) {
  kind_ = PairLoss::kReward;
  positions_ = store_.input(kRewardPositionsInput);
  margins_ = store_.input(kRewardMarginsInput);
  // Plan 1.27's loss and its gradient read each pair's margin; 1.26's have none: one kind or the other.
  const plan::KernelCall* margined = firstCall(plan, KernelId::RewardMarginLoss);
  const plan::KernelCall* loss = margined ? margined : firstCall(plan, KernelId::RewardLoss);
  const bool mixed = firstCall(plan, margined ? KernelId::RewardLoss : KernelId::RewardMarginLoss) ||
                     firstCall(plan, margined ? KernelId::RewardLossGrad : KernelId::RewardMarginLossGrad);
  const bool margins_fit = margins_ < 0 ? !margined : margined && vectorLength(plan, margins_) == rows_ / 2;
  // The call's attributes were checked with the plan (reward_loss_check).
  if (rows_ % 2 != 0 || reference_ >= 0 || vectorLength(plan, policy_) != rows_ ||
      vectorLength(plan, positions_, plan::DTYPE_I32) != rows_ || !loss || mixed || !margins_fit ||
      loss->float_attrs_size() != 1 || firstCall(plan, KernelId::DpoLoss) || firstCall(plan, KernelId::KtoLoss))
    throw Error(fmt::format("the plan's reward-model tensors are malformed: {} must be f32 (batch) of an even batch, "
                            "{} i32 (batch) and {} f32 (batch / 2) beside an mt.reward_margin_loss and its gradient "
                            "(or, before plan 1.27, no margins beside an mt.reward_loss and its), and no other "
                            "preference loss (recompile the plan with mtc --objective reward)",
                            kPolicyRewardsOutput, kRewardPositionsInput, kRewardMarginsInput));
  center_ = loss->float_attrs(0);
}

void Preference::useData(const TokenFile& training, const TokenFile& held_out) {
  if (kto())
    for (const TokenFile* file : {&training, &held_out})
      if (!file->hasLabels())
        throw Error(file->path() + " holds no labelled examples, which a KTO plan (mtc --objective kto) trains on: "
                    "make it with mttok --unpaired");
  if (reward() && margins_ < 0)
    for (const TokenFile* file : {&training, &held_out})
      if (file->hasMargins())
        throw Error(file->path() + " gives each pair a margin, and the plan was compiled before plan 1.27, whose "
                    "reward loss has none: compile it again (mtc --objective reward)");
  training_data_ = &training;
  held_out_data_ = &held_out;
}

void Preference::fillRewardInputs(const TokenFile& data, const std::function<int64_t(int64_t)>& example) const {
  if (margins_ >= 0) {  // pair p's: its data's, 0 where it has none (or p is padding)
    float* margins = store_.f32(margins_);
    for (int64_t p = 0; p < rows_ / 2; ++p) {
      const int64_t e = example(2 * p);
      margins[p] = e >= 0 && data.hasMargins() ? data.margins().at(static_cast<size_t>(e / 2)) : 0.0f;
    }
  }
  int32_t* positions = store_.i32(positions_);
  for (int64_t b = 0; b < rows_; ++b) {
    const int64_t e = example(b);
    if (e < 0) {  // padding: any position in the row (its reward is not scored)
      positions[b] = 0;
      continue;
    }
    const size_t i = static_cast<size_t>(e);
    const int64_t length = data.exampleEnd(i, data.size()) - data.exampleStarts().at(i);
    // The end-of-text token mttok ends each example with is at length - 1: the reward is read just
    // before it, as Hugging Face's classifier reads the last token before the padding; an example
    // longer than the row is cut, and read at the row's end.
    positions[b] = static_cast<int32_t>(length <= seq_ ? std::max<int64_t>(length - 2, 0) : seq_ - 1);
  }
}

ReferenceTable Preference::computeReference(Backend& backend, HostStore& store, const HeldOutBatches& in_order,
                                            const StepOptions& eval, const World& world) const {
  std::fill(store.f32(reference_), store.f32(reference_) + rows_, 0.0f);
  std::vector<double> mine;  // this rank's batches' values, in order
  for (int64_t i = world.rank(); i < in_order.allBatches(); i += world.size()) {
    in_order.fill(i, store.i32(store.tokens()), store.i32(store.targets()), store.tokenMask());
    const StepResult result = backend.runStep(eval);
    if (!result.corrupt_transfer.empty())
      throw Error("the reference log-probabilities: --verify-transfers: the bytes of " + result.corrupt_transfer +
                  " differ from the host's: the link or the device corrupted the copy. Check the GPU (nvidia-smi -q: "
                  "ECC errors; dmesg: Xid errors) and its link, then run again");
    mine.insert(mine.end(), store.f32(policy_), store.f32(policy_) + rows_);
  }
  const std::vector<std::vector<double>> shares = world.allgather(mine);
  ReferenceTable table{in_order.firstExample(), std::vector<float>(static_cast<size_t>(in_order.windows()))};
  for (size_t e = 0; e < table.values.size(); ++e) {
    const size_t batch = e / static_cast<size_t>(rows_), row = e % static_cast<size_t>(rows_);
    const std::vector<double>& share = shares[batch % static_cast<size_t>(world.size())];
    table.values[e] = static_cast<float>(share[batch / static_cast<size_t>(world.size()) * rows_ + row]);
    if (!std::isfinite(table.values[e]))
      throw Error("the reference log-probability of example " + std::to_string(table.first + e) + " is " +
                  std::to_string(table.values[e]) + ": the reference model (the starting weights, or "
                  "--reference-weights) gives its reply no probability");
  }
  return table;
}

void Preference::save(const std::string& path, const ReferenceTable& table, const TokenFile& data) const {
  std::string bytes(kReferenceHeader + 4 * table.values.size(), '\0');
  const uint32_t checksum = data.checksum(), seq = static_cast<uint32_t>(seq_);
  const uint64_t first = table.first, count = table.values.size();
  std::memcpy(&bytes[0], kReferenceMagic, 8);
  std::memcpy(&bytes[8], &checksum, 4);
  std::memcpy(&bytes[12], &seq, 4);
  std::memcpy(&bytes[16], &first, 8);
  std::memcpy(&bytes[24], &count, 8);
  std::memcpy(&bytes[kReferenceHeader], table.values.data(), 4 * table.values.size());
  writeFileAtomically(path, bytes);
}

ReferenceTable Preference::load(const std::string& path, const TokenFile& data, const HeldOutBatches& in_order) const {
  const std::string fix = "resume with the data and plan the run started with, or start the run again";
  const InputFile file(path, "reference log-probabilities", "(" + fix + ")");
  const uint64_t want = static_cast<uint64_t>(in_order.windows());
  char header[kReferenceHeader] = {};
  uint32_t checksum = 0, seq = 0;
  uint64_t first = 0, count = 0;
  if (file.readAt(header, kReferenceHeader, 0) == kReferenceHeader) {
    std::memcpy(&checksum, header + 8, 4), std::memcpy(&seq, header + 12, 4);
    std::memcpy(&first, header + 16, 8), std::memcpy(&count, header + 24, 8);
  }
  if (std::memcmp(header, kReferenceMagic, 8) != 0 || first != in_order.firstExample() || count != want ||
      file.size() != kReferenceHeader + 4 * want)
    throw Error(fmt::format("{} is not the reference log-probabilities of examples {}..{} of {} ({})", path,
                            in_order.firstExample(), in_order.firstExample() + want, data.path(), fix));
  if (checksum != data.checksum() || seq != static_cast<uint64_t>(seq_))
    throw Error(fmt::format("{} holds the reference log-probabilities of {}: {}", path,
                            checksum != data.checksum() ? "other data (its checksum differs)"
                                                        : fmt::format("rows of {} tokens, not {}", seq, seq_),
                            fix));
  ReferenceTable table{in_order.firstExample(), std::vector<float>(want)};
  if (file.readAt(table.values.data(), 4 * want, kReferenceHeader) != 4 * want) throw Error(path + ": cut short");
  for (size_t e = 0; e < want; ++e)
    if (!std::isfinite(table.values[e]))
      throw Error(path + ": example " + std::to_string(first + e) + "'s reference log-probability is not finite (" +
                  fix + ")");
  return table;
}

void Preference::fillReference(const BatchSampler& sampler, int64_t step, int64_t first_row) const {
  const auto example = [&](int64_t b) { return static_cast<int64_t>(sampler.exampleOfRow(step, first_row + b)); };
  if (reward()) return fillRewardInputs(*training_data_, example);
  if (referenceFree()) return;
  float* reference = store_.f32(reference_);
  for (int64_t b = 0; b < rows_; ++b) reference[b] = training_.of(example(b));
  if (!kto()) return;
  float* labels = store_.f32(labels_);
  for (int64_t p = 0; p < rows_ / 2; ++p) labels[p] = training_data_->labels().at(example(2 * p) / 2);
}

void Preference::fillHeldOutReference(const HeldOutBatches& held, int64_t i) const {
  // Row b's example, or -1 for the last batch's padding rows.
  const auto example = [&](int64_t b) -> int64_t {
    return b < held.dataRows(i) ? static_cast<int64_t>(held.firstExample()) + i * rows_ + b : -1;
  };
  if (reward()) return fillRewardInputs(*held_out_data_, example);
  if (referenceFree()) return;
  float* reference = store_.f32(reference_);
  for (int64_t b = 0; b < rows_; ++b) reference[b] = example(b) >= 0 ? held_out_.of(example(b)) : 0.0f;
  if (!kto()) return;
  float* labels = store_.f32(labels_);
  for (int64_t p = 0; p < rows_ / 2; ++p)
    labels[p] = example(2 * p) >= 0 ? held_out_data_->labels().at(example(2 * p) / 2) : 0.0f;
}

// The run's examples of its first `rows` rows (its data: a held-out batch's padding left out), as
// mt.kto_loss scores them: their KL estimate, each example's loss, reward and log-probability by
// its label.
PairScores Preference::scoreKtoRun(int64_t rows, std::vector<ExampleScore>* each) const {
  const float *policy = store_.f32(policy_), *reference = store_.f32(reference_), *labels = store_.f32(labels_);
  const int64_t examples = rows / 2;
  PairScores s;
  if (examples == 0) return s;
  const double kl = ktoKl(policy, reference, examples);
  s.kl = kl, s.kl_runs = 1;
  for (int64_t i = 0; i < examples; ++i) {
    const KtoExample e = ktoExample(kto_, policy, reference, labels, kl, i);
    s.loss += e.loss;
    ++s.pairs;
    if (labels[i] != 0.0f) s.chosen += e.reward, s.logp_chosen += policy[2 * i], ++s.chosen_count;
    else s.rejected += e.reward, s.logp_rejected += policy[2 * i], ++s.rejected_count;
    if (each) each->push_back({e.loss, {e.reward, 0.0}, {policy[2 * i], 0.0}, labels[i] != 0.0f});
  }
  return s;
}

// The run's pairs of its first `rows` rows, as mt.reward_loss scores them.
PairScores Preference::scoreRewardRun(int64_t rows, std::vector<ExampleScore>* each) const {
  const float* rewards = store_.f32(policy_);
  const float* margins = margins_ >= 0 ? store_.f32(margins_) : nullptr;
  PairScores s;
  for (int64_t p = 0; p < rows / 2; ++p) {
    const double margin = margins ? margins[p] : 0.0, loss = rewardPair(rewards, center_, p, margin).loss;
    s.loss += loss;
    s.chosen += rewards[2 * p], s.rejected += rewards[2 * p + 1];
    s.right += rewards[2 * p] > rewards[2 * p + 1];
    ++s.pairs;
    if (each) each->push_back({loss, {rewards[2 * p], rewards[2 * p + 1]}, {0.0, 0.0}, false, margin});
  }
  return s;
}

void Preference::rowRewards(int64_t rows, std::vector<ExampleScore>& each) const {
  const float* rewards = store_.f32(policy_);
  for (int64_t b = 0; b < rows; ++b) each.push_back({0.0, {rewards[b], 0.0}});
}

PairScores Preference::scoreRun(int64_t rows, std::vector<ExampleScore>* each) const {
  if (kto()) return scoreKtoRun(rows, each);
  if (reward()) return scoreRewardRun(rows, each);
  const float* policy = store_.f32(policy_);
  const float* reference = referenceFree() ? zeros_.data() : store_.f32(reference_);
  PairScores s;
  for (int64_t p = 0; p < rows / 2; ++p) {
    const double chosen = loss_.beta * (double(policy[2 * p]) - reference[2 * p]);
    const double rejected = loss_.beta * (double(policy[2 * p + 1]) - reference[2 * p + 1]);
    const DpoPair pair = dpoBatchPair(loss_, policy, reference, rows / 2, p);
    s.loss += pair.loss;  // mt.dpo_loss's
    if (loss_.kind == static_cast<int64_t>(DpoLossKind::kOrpo)) s.log_odds += pair.z, ++s.odds_pairs;
    s.chosen += chosen, s.rejected += rejected;
    s.logp_chosen += policy[2 * p], s.logp_rejected += policy[2 * p + 1];
    s.right += chosen > rejected;
    ++s.pairs;
    if (nll_) {  // mt.pair_nll's sums, from the run's targets
      const int64_t n = rowTargets(store_.i32(store_.targets()), 2 * p, seq_, nll_->vocab);
      s.nll -= nll_->average ? double(policy[2 * p]) * n : double(policy[2 * p]);
      s.nll_tokens += n;
    }
    if (each) each->push_back({pair.loss, {chosen, rejected}, {policy[2 * p], policy[2 * p + 1]}});
  }
  return s;
}

nlohmann::ordered_json Preference::scoreLine(const ExampleScore& s, size_t index, bool text) const {
  if (text) return {{"example", index}, {"reward", s.reward[0]}};
  if (kto())
    return {{"example", index}, {"desirable", s.desirable}, {"reward", s.reward[0]}, {"logps", s.logp[0]},
            {"loss", s.loss}};
  nlohmann::ordered_json line = {{"pair", index},
                                 {"chosen_wins", s.reward[0] > s.reward[1]},
                                 {"reward_chosen", s.reward[0]},
                                 {"reward_rejected", s.reward[1]},
                                 {"reward_margin", s.reward[0] - s.reward[1]}};
  if (!reward()) line["logps_chosen"] = s.logp[0], line["logps_rejected"] = s.logp[1];
  // The data's f32 margin, written as the float it is (0.1, not 0.10000000149011612).
  if (reward() && margins_ >= 0 && held_out_data_ && held_out_data_->hasMargins())
    line["margin"] = std::stod(fmt::format("{}", static_cast<float>(s.margin)));
  line["loss"] = s.loss;
  return line;
}

double Preference::meanLoss(const PairScores& s) const {
  const double pairs = s.pairs ? s.loss / double(s.pairs) : 0.0;
  return pairs + (nll_ && s.nll_tokens ? nll_->alpha * s.nll / double(s.nll_tokens) : 0.0);
}

void Preference::addRanks(const World& world) {
  PairScores total;
  for (const std::vector<double>& share : world.allgather(step_.flat())) total.add(PairScores::unflat(share.data()));
  step_ = total;
}

void Preference::addTo(const PairScores& s, nlohmann::json& line, const std::string& prefix) const {
  if (!s.pairs) return;
  if (reward()) {  // TRL's RewardTrainer's accuracy; its margin, and each side's mean reward
    const double n = static_cast<double>(s.pairs);
    line[prefix + "accuracy"] = static_cast<double>(s.right) / n;
    line[prefix + "reward_chosen"] = s.chosen / n;
    line[prefix + "reward_rejected"] = s.rejected / n;
    line[prefix + "reward_margin"] = (s.chosen - s.rejected) / n;
    return;
  }
  if (kto()) {  // each kind of example apart, as TRL's KTOTrainer logs them
    line[prefix + "kl"] = s.kl / double(s.kl_runs);
    if (s.chosen_count) {
      line[prefix + "reward_chosen"] = s.chosen / double(s.chosen_count);
      line[prefix + "logps_chosen"] = s.logp_chosen / double(s.chosen_count);
    }
    if (s.rejected_count) {
      line[prefix + "reward_rejected"] = s.rejected / double(s.rejected_count);
      line[prefix + "logps_rejected"] = s.logp_rejected / double(s.rejected_count);
    }
    if (s.chosen_count && s.rejected_count)
      line[prefix + "reward_margin"] = s.chosen / double(s.chosen_count) - s.rejected / double(s.rejected_count);
    return;
  }
  const double n = static_cast<double>(s.pairs);
  line[prefix + "pairs_right"] = static_cast<double>(s.right) / n;
  line[prefix + "reward_chosen"] = s.chosen / n;
  line[prefix + "reward_rejected"] = s.rejected / n;
  line[prefix + "reward_margin"] = (s.chosen - s.rejected) / n;
  line[prefix + "logps_chosen"] = s.logp_chosen / n;
  line[prefix + "logps_rejected"] = s.logp_rejected / n;
  if (s.nll_tokens) line[prefix + "nll"] = s.nll / double(s.nll_tokens);
  if (s.odds_pairs) line[prefix + "log_odds"] = s.log_odds / double(s.odds_pairs);
}

std::string Preference::describe(const PairScores& s) const {
  if (!s.pairs) return "";
  if (reward())
    return fmt::format("  accuracy {:.0f}%  margin {:.3f}", 100.0 * double(s.right) / double(s.pairs),
                       (s.chosen - s.rejected) / double(s.pairs));
  if (kto()) {
    std::string text = fmt::format("  kl {:.3f}", s.kl / double(s.kl_runs));
    if (s.chosen_count) text += fmt::format("  reward desirable {:.3f}", s.chosen / double(s.chosen_count));
    if (s.rejected_count) text += fmt::format("  undesirable {:.3f}", s.rejected / double(s.rejected_count));
    return text;
  }
  return fmt::format("  chosen beats rejected {:.0f}%  margin {:.3f}", 100.0 * double(s.right) / double(s.pairs),
                     (s.chosen - s.rejected) / double(s.pairs));
}

}  // namespace mt
