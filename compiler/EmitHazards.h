// The emitter's ordering between streams: a hazard tracker over byte ranges of the device arena
// and of each host allocation (read-after-write, write-after-read, write-after-write). Each
// instruction's accesses give the earlier instructions it must follow; compiler/EmitStreams.cpp
// turns those into the fewest events.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

namespace mt {

// Where bytes live: the device arena (kDeviceSpace) or one host allocation (its host tensor
// index; gradients in the landing buffer live in the landing tensor's space).
constexpr int kDeviceSpace = -1;
struct ByteRange {
  int space;
  int64_t begin, end;
};

// Last writer and readers since, per byte range of each space. The ranges of a space are kept
// sorted by their start with the longest one's length, so a query visits only the ranges that
// start within that length before it (a 100B plan has thousands per space).
class HazardTracker {
 public:
  void read(ByteRange r, int instr, std::vector<int>& deps) {
    Space& space = spaces_[r.space];
    forOverlapping(space, r, [&](const Access& access) {
      if (access.writer >= 0) deps.push_back(access.writer);
    });
    space.add({r.begin, r.end}).readers.push_back(instr);
  }
  void write(ByteRange r, int instr, std::vector<int>& deps) {
    Space& space = spaces_[r.space];
    forOverlapping(space, r, [&](const Access& access) { collect(access, deps); });
    space.add({r.begin, r.end}) = Access{instr, {}};
  }

 private:
  struct Access {
    int writer = -1;
    std::vector<int> readers;
  };
  struct Space {
    std::map<std::pair<int64_t, int64_t>, Access> ranges;  // [begin, end) -> accesses
    int64_t longest = 0;
    Access& add(std::pair<int64_t, int64_t> range) {
      longest = std::max(longest, range.second - range.first);
      return ranges[range];
    }
  };
  // Calls visit(access) for each range overlapping `r`, in the order of their starts.
  template <typename Visit>
  static void forOverlapping(const Space& space, ByteRange r, Visit visit) {
    const int64_t first_start = r.begin - space.longest;  // a range starting earlier ends before r
    for (auto it = space.ranges.lower_bound({first_start, std::numeric_limits<int64_t>::min()});
         it != space.ranges.end() && it->first.first < r.end; ++it)
      if (r.begin < it->first.second) visit(it->second);
  }
  static void collect(const Access& a, std::vector<int>& deps) {
    if (a.writer >= 0) deps.push_back(a.writer);
    deps.insert(deps.end(), a.readers.begin(), a.readers.end());
  }
  std::map<int, Space> spaces_;
};

}  // namespace mt
