#include "compiler/EmitStreams.h"

#include <algorithm>
#include <utility>

#include "compiler/PlanTemplates.h"

namespace mt {
namespace {

// The events of a step: per instruction the events it waits for (per other stream only its
// latest dependency, and only if its stream has not already waited for that point or later),
// and the event each instruction records (-1: none). Returns the number of events.
int placeEvents(const std::vector<Instr>& instrs, std::vector<std::vector<int>>& waits, std::vector<int>& recordEvent) {
  // Position of each instruction in its stream.
  std::vector<int> position(instrs.size());
  int counts[kNumStreams] = {0, 0, 0, 0};
  for (size_t i = 0; i < instrs.size(); ++i) position[i] = counts[instrs[i].stream]++;

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

}  // namespace

void assembleStreams(std::vector<Instr>& instrs, bool templates, plan::Plan& plan, PlanStats& stats) {
  std::vector<std::vector<int>> waits;
  std::vector<int> recordEvent;
  const int numEvents = placeEvents(instrs, waits, recordEvent);
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
  std::vector<int64_t> computeSegments;  // per compute-stream instruction, its Instr's segment
  for (size_t i = 0; i < instrs.size(); ++i) {
    plan::Stream* stream = plan.mutable_streams(instrs[i].stream);
    const int before = stream->instructions_size();
    for (int e : waits[i]) stream->add_instructions()->set_wait_event(e);
    instrs[i].body.set_predicted_us(instrs[i].micros);
    *stream->add_instructions() = instrs[i].body;
    if (recordEvent[i] >= 0) stream->add_instructions()->set_record_event(recordEvent[i]);
    if (instrs[i].stream == kCompute)
      computeSegments.insert(computeSegments.end(), stream->instructions_size() - before, instrs[i].segment);
  }
  plan.set_num_events(numEvents);
  if (templates) addBlockTemplates(*plan.mutable_streams(kCompute), computeSegments, plan);
}

}  // namespace mt
