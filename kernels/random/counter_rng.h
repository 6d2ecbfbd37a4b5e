// Counter-based random numbers: a draw is a pure function of its key and index, so any draw can
// be made again, in any order, on any backend (the seeded initializers, the batch order,
// sampling, dropout's mask). SplitMix64 (Steele, Lea and Flood 2014), its increment and
// finaliser: consecutive inputs give independent-looking outputs.
#pragma once
#include <cstdint>

#include "kernels/kernel_args.h"

namespace mt {

MT_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace mt
