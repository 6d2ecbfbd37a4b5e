#include "compiler/PlanTemplates.h"

#include <algorithm>
#include <map>
#include <string>

namespace mt {
namespace {

// A run of instructions of one tag: its kernel calls with their buffers renumbered as slots in
// order of first use (two runs with the same `key` differ only in the buffers they name), and
// its waits and records by the kernel call they precede or follow.
struct Segment {
  int begin = 0, end = 0;
  int64_t tag = -1;
  std::string key;
  std::vector<uint32_t> buffers;          // slot -> what this run names
  std::vector<plan::Instruction> body;    // kernel calls, with slots
  std::vector<std::pair<uint32_t, uint32_t>> waits, records;  // (kernel call, event)
};

Segment canonicalize(const plan::Stream& stream, int begin, int end, int64_t tag) {
  Segment s;
  s.begin = begin, s.end = end, s.tag = tag;
  std::map<uint32_t, uint32_t> slots;
  auto slot = [&](uint32_t id) {
    auto [it, added] = slots.emplace(id, static_cast<uint32_t>(s.buffers.size()));
    if (added) s.buffers.push_back(id);
    return it->second;
  };
  for (int i = begin; i < end; ++i) {
    plan::Instruction in = stream.instructions(i);
    const auto at = static_cast<uint32_t>(s.body.size());
    if (in.has_wait_event()) {
      s.waits.emplace_back(at, in.wait_event());  // before the next kernel call
    } else if (in.has_record_event()) {
      if (at == 0) return Segment{begin, end, -1, {}, {}, {}, {}, {}};  // nothing to follow: keep as is
      s.records.emplace_back(at - 1, in.record_event());  // after the last kernel call
    } else if (in.has_kernel()) {
      for (auto& b : *in.mutable_kernel()->mutable_inputs()) b = slot(b);
      for (auto& b : *in.mutable_kernel()->mutable_outputs()) b = slot(b);
      const std::string bytes = in.SerializeAsString();
      s.key += std::to_string(bytes.size()) + ":" + bytes;
      s.body.push_back(std::move(in));
    } else {
      return Segment{begin, end, -1, {}, {}, {}, {}, {}};  // copies and host tasks are not templated
    }
  }
  if (!s.waits.empty() && s.waits.back().first >= s.body.size()) return Segment{begin, end, -1, {}, {}, {}, {}, {}};
  return s;
}

// "blocks 1-31 forward (31 launches)": the blocks a template serves (tags are 3 * block +
// 0 forward, 1 recompute, 2 backward).
std::string templateName(const std::vector<int64_t>& tags) {
  const int64_t first = *std::min_element(tags.begin(), tags.end()) / 3;
  const int64_t last = *std::max_element(tags.begin(), tags.end()) / 3;
  const char* phases[] = {" forward", " recompute", " backward"};
  std::string name = first == last ? "block " + std::to_string(first)
                                   : "blocks " + std::to_string(first) + "-" + std::to_string(last);
  return name + phases[tags.front() % 3] + " (" + std::to_string(tags.size()) + " launches)";
}

}  // namespace

void addBlockTemplates(plan::Stream& stream, const std::vector<int64_t>& segment_of, plan::Plan& plan) {
  std::vector<Segment> runs;
  for (int i = 0, n = stream.instructions_size(); i < n;) {
    int j = i;
    while (j < n && segment_of[j] == segment_of[i]) ++j;
    runs.push_back(segment_of[i] >= 0 ? canonicalize(stream, i, j, segment_of[i]) : Segment{i, j, -1, {}, {}, {}, {}, {}});
    i = j;
  }
  std::map<std::string, std::vector<int64_t>> users;  // key -> tags of the runs with it
  for (const Segment& s : runs)
    if (!s.key.empty()) users[s.key].push_back(s.tag);
  std::map<std::string, uint32_t> template_of;
  google::protobuf::RepeatedPtrField<plan::Instruction> out;
  for (const Segment& s : runs) {
    if (s.key.empty() || users[s.key].size() < 2) {
      for (int i = s.begin; i < s.end; ++i) *out.Add() = stream.instructions(i);
      continue;
    }
    auto [it, added] = template_of.emplace(s.key, static_cast<uint32_t>(plan.templates_size()));
    if (added) {
      plan::BlockTemplate* t = plan.add_templates();
      t->set_name(templateName(users[s.key]));
      t->set_num_buffers(static_cast<uint32_t>(s.buffers.size()));
      for (const auto& in : s.body) *t->add_instructions() = in;
    }
    plan::Launch* launch = out.Add()->mutable_launch();
    launch->set_block_template(it->second);
    for (uint32_t b : s.buffers) launch->add_buffers(b);
    for (auto [at, event] : s.waits) {
      auto* sync = launch->add_waits();
      sync->set_at(at);
      sync->set_event(event);
    }
    for (auto [at, event] : s.records) {
      auto* sync = launch->add_records();
      sync->set_at(at);
      sync->set_event(event);
    }
  }
  *stream.mutable_instructions() = std::move(out);
}

}  // namespace mt
