// The emitter's ordering between streams: a hazard tracker over byte ranges of the device arena
// and of each host allocation (read-after-write, write-after-read, write-after-write). Each
// instruction's accesses give the earlier instructions it must follow; compiler/EmitStreams.cpp
// turns those into the fewest events.
#pragma once
#include <algorithm>
#include <bit>
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
// by size class (lengths within a power of two), each class sorted by start with its longest
// length, so a query visits in each class only the ranges that start within that length before
// it: a 100B plan has thousands of ranges per space, and a token-tiled one small tiles beside
// wholes of gigabytes.
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
  struct SizeClass {
    std::map<std::pair<int64_t, int64_t>, Access> ranges;  // [begin, end) -> accesses
    int64_t longest = 0;
  };
  struct Space {
    std::map<int, SizeClass> classes;  // by the bit width of a range's length
    Access& add(std::pair<int64_t, int64_t> range) {
      const int64_t length = range.second - range.first;
      SizeClass& c = classes[std::bit_width(static_cast<uint64_t>(std::max<int64_t>(length, 0)))];
      c.longest = std::max(c.longest, length);
      return c.ranges[range];
    }
  };
  // Calls visit(access) for each range overlapping `r`.
  template <typename Visit>
  static void forOverlapping(const Space& space, ByteRange r, Visit visit) {
    for (const auto& [width, c] : space.classes) {
      const int64_t first_start = r.begin - c.longest;  // a range starting earlier ends before r
      for (auto it = c.ranges.lower_bound({first_start, std::numeric_limits<int64_t>::min()});
           it != c.ranges.end() && it->first.first < r.end; ++it)
        if (r.begin < it->first.second) visit(it->second);
    }
  }
  static void collect(const Access& a, std::vector<int>& deps) {
    if (a.writer >= 0) deps.push_back(a.writer);
    deps.insert(deps.end(), a.readers.begin(), a.readers.end());
  }
  std::map<int, Space> spaces_;
};

}  // namespace mt
