// loss_only_check PLAN [WEIGHTS]: runs one validation batch of PLAN twice on the CPU backend —
// the whole step without its update, then the loss-only run (the plan's loss prefixes) — and
// fails unless both losses are the same bits and the loss-only run ran fewer instructions; then
// the loss-only run again on an evaluation's store (mtrun --eval-only: no optimizer tensor
// allocated, which the plan's loss-only run must spare), the same bits again; then as mtrun runs it,
// a validation and two whole runs skipping the copies the device keeps (a training plan's frozen
// weights) after the first, the same bits each and the gradients of a run that copies everything.
// Prints the share of each stream the loss-only run executes and each way's best time of three. Used by tests/e2e/loss_only.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/backends/backend.h"
#include "runtime/io/error.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/plan_format.h"
#include "runtime/io/safetensors.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: loss_only_check PLAN [WEIGHTS]\n");
    return 2;
  }
  try {
    const mt::plan::Plan plan = mt::readPlan(argv[1]);
    mt::verifyPlan(plan);
    // The weights and one batch's tokens and targets.
    const auto fill = [&](mt::HostStore& store) {
      store.initialize(plan.init_seed());
      if (argc > 2) store.loadParams(mt::SafetensorsFile(argv[2]));
      const int64_t vocab = plan.model().vocab();
      int32_t* tokens = store.i32(store.tokens());
      int32_t* targets = store.i32(store.targets());
      for (int64_t i = 0; i < store.numel(store.tokens()); ++i) {
        tokens[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);
        targets[i] = static_cast<int32_t>((i * 104729 + 7) % vocab);
      }
    };
    mt::HostStore store(plan);
    fill(store);
    auto backend = mt::createCpuBackend(plan, store);
    mt::StepOptions eval;
    eval.update = false;
    eval.grad_clip = 0;  // (an on-arrival plan takes none; nothing is updated here anyway)
    // Each way three times: the loss of the last, the best time.
    auto run = [&](bool loss_only, double& best_ms) {
      eval.loss_only = loss_only;
      float loss = 0;
      best_ms = 1e30;
      for (int i = 0; i < 3; ++i) {
        const auto start = std::chrono::steady_clock::now();
        loss = backend->runStep(eval).loss;
        best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
      return loss;
    };
    double whole_ms = 0, loss_only_ms = 0;
    const float whole = run(false, whole_ms);
    const float loss_only = run(true, loss_only_ms);
    const auto all = mt::stepLengths(plan, false), prefix = mt::stepLengths(plan, true);
    size_t ran = 0, total = 0;
    for (size_t s = 0; s < all.size(); ++s) {
      std::printf("  %s: %zu of %zu instructions\n", plan.streams(static_cast<int>(s)).name().c_str(), prefix[s], all[s]);
      ran += prefix[s], total += all[s];
    }
    std::printf("loss %.9g (whole step, %.1f ms), %.9g (loss only: %zu of %zu instructions, %.1f ms)\n", whole, whole_ms,
                loss_only, ran, total, loss_only_ms);
    if (!mt::lossRunSparesOptimizer(plan)) {
      std::printf("FAILED: the loss-only run touches the optimizer's tensors\n");
      return 1;
    }
    mt::HostStore evaluation(plan, nullptr, mt::HostUse::kEvaluation);
    fill(evaluation);
    eval.loss_only = true;
    const float evaluated = mt::createCpuBackend(plan, evaluation)->runStep(eval).loss;
    std::printf("loss %.9g on an evaluation's store (%.1f of %.1f bytes per parameter)\n", evaluated,
                double(evaluation.totalBytes()) / double(evaluation.numParams()),
                double(store.totalBytes()) / double(store.numParams()));
    // As mtrun runs a plan (StepOptions::weights_unchanged: the copies the device keeps — a
    // training plan's frozen weights — skipped after the first whole run): a validation first
    // (which makes only its prefixes' kept copies), then two whole runs, on a fresh backend; their
    // gradients against a whole run's that copies everything.
    mt::HostStore copied_store(plan);
    fill(copied_store);
    eval.loss_only = false;
    mt::createCpuBackend(plan, copied_store)->runStep(eval);
    mt::HostStore kept_store(plan);
    fill(kept_store);
    auto kept_backend = mt::createCpuBackend(plan, kept_store);
    eval.weights_unchanged = true;
    eval.loss_only = true;
    const float kept_validation = kept_backend->runStep(eval).loss;
    eval.loss_only = false;
    std::string differs;  // the first gradient a whole run with kept copies gives otherwise
    const auto gradients = [&](const char* run) {
      for (int t = 0; t < plan.host_tensors_size() && differs.empty(); ++t)
        if (plan.host_tensors(t).role() == mt::plan::ROLE_GRAD &&
            std::memcmp(kept_store.data(t), copied_store.data(t), kept_store.bytes(t)) != 0)
          differs = plan.host_tensors(t).name() + " after the " + run + " whole run";
    };
    const float kept_first = kept_backend->runStep(eval).loss;
    gradients("first");
    const float kept_later = kept_backend->runStep(eval).loss;
    gradients("second");
    const auto kept = mt::keptCopies(plan);
    const auto prefixes = mt::stepLengths(plan, true);
    int beyond = 0;  // kept copies past their stream's loss prefix: a validation does not make them
    for (size_t s = 0; s < kept.size(); ++s)
      for (size_t i = prefixes[s]; i < kept[s].size(); ++i) beyond += kept[s][i];
    std::printf("loss %.9g, %.9g, %.9g: a validation, then whole runs that skip the %lld bytes of kept copies "
                "(%d past the loss prefixes) after the first; gradients %s\n",
                kept_validation, kept_first, kept_later, static_cast<long long>(mt::keptCopyBytes(plan)), beyond,
                differs.empty() ? "as copying everything" : ("differ: " + differs).c_str());
    const auto same = [&](float x) { return std::memcmp(&whole, &x, sizeof(float)) == 0; };
    if (!same(loss_only) || ran >= total || !same(evaluated) || !same(kept_validation) || !same(kept_first) ||
        !same(kept_later) || !differs.empty()) {
      std::printf("FAILED\n");
      return 1;
    }
    return 0;
  } catch (const mt::Error& e) {
    std::fprintf(stderr, "loss_only_check: error: %s\n", e.what());
    return 1;
  }
}
