// Choosing the next token from a model's logits: greedy, or drawn with temperature, top-k and
// top-p (nucleus), from a counter-based generator so the same seed gives the same text.
#pragma once
#include <cstdint>

namespace mt {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the most likely token)
  int64_t top_k = 0;         // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // then the fewest whose probability reaches p; 1: all
  uint64_t seed = 0;
};

// The next token from one position's `vocab` logits. Greedy: the largest logit (the lowest id
// among equals). Otherwise softmax(logits / temperature) over the top_k most likely tokens, cut
// to the smallest prefix whose probability reaches top_p and renormalised, drawn with the
// uniform number that (seed, draw) gives. Throws mt::Error for a NaN logit.
uint32_t sampleToken(const float* logits, int64_t vocab, const SamplingOptions& options, uint64_t draw);

}  // namespace mt
