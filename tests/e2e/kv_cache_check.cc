// kv_cache_check WINDOW_PLAN DECODE_PLAN WEIGHTS [TOLERANCE]: the key/value cache gives the
// logits of recomputing the whole prefix. Both plans (mtc --forward-only, and with --kv-cache, of
// one model, batch and seq) get the same weights; each row is its own random text of seq tokens.
// The window plan runs once over the texts; the decode plan runs token by token through
// mt::Generator (as mtgen does), and its logits at every position of every row must lie within
// TOLERANCE (default 1e-5, absolute) of the window plan's there. Runs on the backend "auto"
// picks (the GPU where there is one). Then the weights the device keeps between runs: with the
// host's weights zeroed, a run told they are unchanged must give the last logits bit for bit
// where the plan keeps them (resident) and others where it keeps none (streamed), and a run
// told they changed must give others. Used by tests/e2e/kv_cache.sh.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/generation/generator.h"
#include "runtime/io/error.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_format.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "runtime/training/run_setup.h"

namespace {

// A plan with its weights on a backend, and the generator over them.
struct Loaded {
  Loaded(const char* path, const char* weights)
      : plan(mt::readPlan(path)), store((mt::verifyPlan(plan), plan)) {
    store.initialize(plan.init_seed());
    store.loadParams(mt::SafetensorsFile(weights));
    kind = mt::chooseBackend(mt::BackendChoice::kAuto, false, plan);
    backend = mt::createBackend(kind, mt::CudaOptions{}, plan, store);
    generator = std::make_unique<mt::Generator>(plan, store, *backend);
  }
  mt::plan::Plan plan;
  mt::HostStore store;
  mt::BackendKind kind;
  std::unique_ptr<mt::Backend> backend;
  std::unique_ptr<mt::Generator> generator;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: kv_cache_check WINDOW_PLAN DECODE_PLAN WEIGHTS [TOLERANCE]\n");
    return 2;
  }
  const double tolerance = argc > 4 ? std::atof(argv[4]) : 1e-5;
  try {
    Loaded window(argv[1], argv[3]), decode(argv[2], argv[3]);
    mt::Generator &whole = *window.generator, &cached = *decode.generator;
    if (whole.cached() || !cached.cached() || whole.rows() != cached.rows() || whole.window() != cached.window() ||
        whole.vocab() != cached.vocab())
      throw mt::Error("give a window plan, then the decode plan of the same model, batch and seq");
    const int64_t rows = whole.rows(), seq = whole.window(), vocab = whole.vocab();
    std::vector<std::vector<uint32_t>> text(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < seq; ++i) text[r].push_back(static_cast<uint32_t>((r * 7919 + i * 104729 + 13) % vocab));
    whole.runWindow(text);
    std::vector<float> all(static_cast<size_t>(rows * seq * vocab)), got(static_cast<size_t>(vocab));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < seq; ++p) whole.readLogits(r, p, all.data() + (r * seq + p) * vocab);
    std::vector<uint32_t> ids(static_cast<size_t>(rows));
    double worst = 0, largest = 0;
    int shown = 0;  // the first few mismatches
    for (int64_t p = 0; p < seq; ++p) {
      for (int64_t r = 0; r < rows; ++r) ids[r] = text[r][p];
      cached.runDecode(ids, p);
      for (int64_t r = 0; r < rows; ++r) {
        cached.readLogits(r, 0, got.data());
        for (int64_t v = 0; v < vocab; ++v) {
          const double expected = all[(r * seq + p) * vocab + v], diff = std::fabs(got[v] - expected);
          largest = std::max(largest, std::fabs(expected));
          worst = std::isnan(diff) ? INFINITY : std::max(worst, diff);
          if (!(diff <= tolerance) && shown++ < 5)
            std::fprintf(stderr, "row %lld position %lld logit %lld: decode %.7g, window %.7g\n", (long long)r,
                         (long long)p, (long long)v, got[v], expected);
        }
      }
    }
    // The device kept the weights between runs: with the host's weights zeroed, a run that says
    // they are unchanged gives the last run's logits bit for bit; one that does not, others.
    std::vector<float> last(static_cast<size_t>(rows * vocab)), again(last.size());
    for (int64_t r = 0; r < rows; ++r) cached.readLogits(r, 0, last.data() + r * vocab);
    for (int t = 0; t < decode.plan.host_tensors_size(); ++t) {
      const auto role = decode.plan.host_tensors(t).role();
      if (role == mt::plan::ROLE_PARAM || role == mt::plan::ROLE_STAGING)  // a split master: its staging copy
        if (decode.store.data(t)) std::memset(decode.store.data(t), 0, decode.store.bytes(t));
    }
    auto rerun = [&](bool unchanged) {
      mt::StepOptions run;
      run.random.training = false;
      run.weights_unchanged = unchanged;
      decode.backend->runStep(run);
      for (int64_t r = 0; r < rows; ++r) cached.readLogits(r, 0, again.data() + r * vocab);
      return again == last;
    };
    // A streamed plan's weights may share their bytes with other values: it keeps some or none.
    int64_t weight_bytes = 0;
    for (const auto& stream : decode.plan.streams())
      for (const auto& in : stream.instructions())
        if (in.has_copy() && in.copy().direction() == mt::plan::Copy::HOST_TO_DEVICE &&
            decode.plan.host_tensors(in.copy().host_tensor()).role() != mt::plan::ROLE_INPUT &&
            decode.plan.host_tensors(in.copy().host_tensor()).role() != mt::plan::ROLE_TOKENS)
          weight_bytes += mt::copyBytes(decode.plan, in.copy());
    const bool keeps_all = mt::keptCopyBytes(decode.plan) == weight_bytes;
    const bool kept = rerun(true) == keeps_all, recopied = !rerun(false);
    std::printf("kv_cache_check: weights kept on the device between runs: %s (%s); copied again when changed: %s\n",
                keeps_all ? "all" : "not all (streamed)", kept ? "as said" : "NOT as said", recopied ? "yes" : "NO");
    std::printf("kv_cache_check: %s backend, %lld rows x %lld positions x %lld logits: max |decode - window| = %.3g "
                "(logits up to %.3g, tolerance %.1g)\n",
                decode.kind == mt::BackendKind::kCuda ? "cuda" : "cpu", (long long)rows, (long long)seq,
                (long long)vocab, worst, largest, tolerance);
    return worst <= tolerance && kept && recopied ? 0 : 1;
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "kv_cache_check: %s\n", e.what());
    return 1;
  }
}
