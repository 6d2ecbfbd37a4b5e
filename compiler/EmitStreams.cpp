#include "compiler/EmitStreams.h"

#include <algorithm>
#include <utility>

#include "compiler/PlanTemplates.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"

namespace mt {
namespace {

// The events of a step: per instruction the events it waits for (per other stream only its
// latest dependency, and only if its stream has not already waited for that point or later),
// and the event each instruction records (-1: none). Returns the number of events.
int placeEvents(const std::vector<Instr>& instrs, const std::vector<int>& position, std::vector<std::vector<int>>& waits,
                std::vector<int>& recordEvent) {
  recordEvent.assign(instrs.size(), -1);
  waits.assign(instrs.size(), {});
  int waited[kNumStreams][kNumStreams];
  for (auto& row : waited) std::fill(row, row + kNumStreams, -1);
  int numEvents = 0;
  for (size_t i = 0; i < instrs.size(); ++i) {
    const int s = instrs[i].stream;
    int latest[kNumStreams] = {-1, -1, -1, -1};
    for (int d : instrs[i].deps) {
      const int t = instrs[d].stream;
      if (t != s && (latest[t] < 0 || position[d] > position[latest[t]])) latest[t] = d;
    }
    for (int t = 0; t < kNumStreams; ++t) {
      const int d = latest[t];
      if (d < 0 || position[d] <= waited[s][t]) continue;
      if (recordEvent[d] < 0) recordEvent[d] = numEvents++;
      waits[i].push_back(recordEvent[d]);
      waited[s][t] = position[d];
    }
  }
  return numEvents;
}

// The predicted timeline: each stream runs in order, and an instruction starts once its stream
// is free and everything it depends on has finished. Fills the stats' busy and wait times and
// the step time.
void predictTimeline(const std::vector<Instr>& instrs, PlanStats& stats) {
  std::vector<double> end(instrs.size());
  std::vector<int> cause(instrs.size());
  double streamFree[kNumStreams] = {0, 0, 0, 0};
  for (size_t i = 0; i < instrs.size(); ++i) {
    const int s = instrs[i].stream;
    double start = streamFree[s];
    int waitedFor = -1;  // the dependency that ended last, if it delayed the start
    for (int d : instrs[i].deps)
      if (end[d] > start) start = end[d], waitedFor = d;
    // A wait is charged to the stream whose busy time caused it, through chains of waits
    // (compute waits for a copy that waited for the host optimizer: the host's).
    cause[i] = waitedFor >= 0 ? cause[waitedFor] : s;
    if (s == kCompute && waitedFor >= 0) stats.compute_wait_us[cause[i]] += start - streamFree[s];
    end[i] = start + instrs[i].micros;
    streamFree[s] = end[i];
    double* busy[] = {&stats.compute_us, &stats.h2d_us, &stats.d2h_us, &stats.host_us};
    *busy[s] += instrs[i].micros;
    stats.step_us = std::max(stats.step_us, end[i]);
  }
  // After the last kernel the compute stream is idle too (copies out, the norm).
  const double waitedUs = stats.compute_wait_us[kH2D] + stats.compute_wait_us[kD2H] + stats.compute_wait_us[kHost];
  stats.compute_wait_us[kCompute] = std::max(0.0, stats.step_us - stats.compute_us - waitedUs);
}

// A training step's loss-only run (validation; a preference plan's reference pass): per stream,
// how many of its instructions (in Instr order) it must execute. Everything the copies out of the
// loss and of a preference plan's policy log-probabilities (a reward model's rewards) depend on, then in each stream what
// comes before that, then whatever those depend on, until nothing more is needed. Empty when the
// step has no loss (a forward-only plan).
std::vector<int> lossPrefixes(const std::vector<Instr>& instrs, const std::vector<int>& position,
                              const plan::Plan& plan) {
  int loss = -1;
  std::vector<int> pending;
  for (size_t i = 0; i < instrs.size(); ++i) {
    if (!instrs[i].body.has_copy() || instrs[i].body.copy().direction() != plan::Copy::DEVICE_TO_HOST) continue;
    const plan::HostTensor& t = plan.host_tensors(instrs[i].body.copy().host_tensor());
    if (t.role() == plan::ROLE_LOSS) loss = static_cast<int>(i);
    if (t.role() == plan::ROLE_LOSS ||
        (t.role() == plan::ROLE_OUTPUT && (t.name() == kPolicyLogprobsOutput || t.name() == kPolicyRewardsOutput)))
      pending.push_back(static_cast<int>(i));
  }
  if (loss < 0) return {};
  std::vector<std::vector<int>> byStream(kNumStreams);  // stream -> its instructions in order
  for (size_t i = 0; i < instrs.size(); ++i) byStream[instrs[i].stream].push_back(static_cast<int>(i));
  std::vector<int> prefix(kNumStreams, 0);
  auto need = [&](int i) {
    if (position[i] >= prefix[instrs[i].stream]) pending.push_back(i);
  };
  while (!pending.empty()) {
    const int i = pending.back();
    pending.pop_back();
    const int s = instrs[i].stream;
    if (position[i] < prefix[s]) continue;
    const int from = prefix[s];
    prefix[s] = position[i] + 1;
    // The instructions newly inside the prefix, and what each depends on.
    for (int at = from; at < prefix[s]; ++at)
      for (int d : instrs[byStream[s][at]].deps) need(d);
  }
  return prefix;
}

// A training plan's copies the device keeps between steps (frozen weights, their staging copies,
// constants: keptCopies) move their bytes in the first step only. The stats become a later
// step's — its bytes, its timeline — and the first step's extra bytes and time are kept apart.
// `at[i]`: instruction i's index in its plan stream.
void predictLaterSteps(std::vector<Instr>& instrs, const std::vector<int>& at, const plan::Plan& plan,
                       PlanStats& stats) {
  if (!isTrainingPlan(plan)) return;
  const std::vector<std::vector<bool>> kept = keptCopies(plan);
  std::vector<Instr> later = instrs;
  for (size_t i = 0; i < instrs.size(); ++i) {
    if (instrs[i].stream != kH2D || !kept[kH2D][at[i]]) continue;
    const plan::Copy& copy = instrs[i].body.copy();
    const plan::HostTensor& host = plan.host_tensors(copy.host_tensor());
    const int64_t bytes = instrs[i].body.bytes();
    stats.first_step_h2d_bytes += bytes;
    stats.h2d_bytes -= bytes;
    if (host.role() == plan::ROLE_PARAM || host.role() == plan::ROLE_STAGING) {
      stats.weight_h2d_bytes -= bytes;
      stats.frozen_h2d_bytes -= bytes;  // (a training plan keeps only frozen weights' copies)
      stats.first_step_weight_bytes += bytes;
      stats.weight_h2d_numel -= bytes / dtypeBytes(host.dtype());
    }
    later[i].micros = 0;
  }
  if (stats.first_step_h2d_bytes == 0) return;
  stats.first_step_us = stats.step_us;
  stats.compute_us = stats.h2d_us = stats.d2h_us = stats.host_us = stats.step_us = 0;
  std::fill(std::begin(stats.compute_wait_us), std::end(stats.compute_wait_us), 0.0);
  predictTimeline(later, stats);
}

}  // namespace

void assembleStreams(std::vector<Instr>& instrs, bool templates, plan::Plan& plan, PlanStats& stats) {
  std::vector<int> position(instrs.size());  // of each instruction in its stream
  int counts[kNumStreams] = {0, 0, 0, 0};
  for (size_t i = 0; i < instrs.size(); ++i) position[i] = counts[instrs[i].stream]++;
  std::vector<std::vector<int>> waits;
  std::vector<int> recordEvent;
  const int numEvents = placeEvents(instrs, position, waits, recordEvent);
  predictTimeline(instrs, stats);

  const std::pair<const char*, plan::Stream::Kind> streams[] = {{"compute", plan::Stream::COMPUTE},
                                                                {"h2d", plan::Stream::HOST_TO_DEVICE},
                                                                {"d2h", plan::Stream::DEVICE_TO_HOST},
                                                                {"host", plan::Stream::HOST}};
  for (auto [name, kind] : streams) {
    plan::Stream* stream = plan.add_streams();
    stream->set_name(name);
    stream->set_kind(kind);
  }
  const std::vector<int> prefix = lossPrefixes(instrs, position, plan);
  std::vector<int64_t> computeSegments;  // per compute-stream instruction, its Instr's segment
  std::vector<int> at(instrs.size());    // per instruction, its index in its plan stream
  for (size_t i = 0; i < instrs.size(); ++i) {
    const int s = instrs[i].stream;
    plan::Stream* stream = plan.mutable_streams(s);
    const int before = stream->instructions_size();
    for (int e : waits[i]) stream->add_instructions()->set_wait_event(e);
    instrs[i].body.set_predicted_us(instrs[i].micros);
    at[i] = stream->instructions_size();
    *stream->add_instructions() = instrs[i].body;
    if (recordEvent[i] >= 0) stream->add_instructions()->set_record_event(recordEvent[i]);
    if (s == kCompute)
      computeSegments.insert(computeSegments.end(), stream->instructions_size() - before, instrs[i].segment);
    // The prefix ends after the last needed instruction's own record (its waits come before it).
    if (!prefix.empty() && position[i] < prefix[s]) stream->set_loss_prefix(stream->instructions_size());
  }
  for (int s = 0; !prefix.empty() && s < kNumStreams; ++s)
    if (!plan.streams(s).has_loss_prefix()) plan.mutable_streams(s)->set_loss_prefix(0);
  plan.set_num_events(numEvents);
  predictLaterSteps(instrs, at, plan, stats);
  if (templates) addBlockTemplates(*plan.mutable_streams(kCompute), computeSegments, plan);
}

}  // namespace mt
