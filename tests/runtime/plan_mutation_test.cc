// A corrupt or hostile plan gives an error, never a crash or an out-of-bounds access: plans
// mutated at random (bytes, truncations, and field edits aimed at every index, offset, shape
// and event) are each either rejected by the verifier or, if accepted, executed for one step.
// Built a second time with AddressSanitizer + UBSan (mt_plan_mutation_asan), where any stray
// access aborts the test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "runtime/backends/backend.h"
#include "runtime/io/error.h"
#include "runtime/host/host_store.h"
#include "runtime/plan/op_table.h"
#include "runtime/plan/plan_queries.h"
#include "runtime/plan/verifier.h"
#include "tests/runtime/expect_error.h"
#include "tests/runtime/scratch_path.h"

namespace mt {
namespace {

struct Counts {
  int tried = 0, rejected = 0, executed = 0;
};

std::string planPath() {
  const char* path = std::getenv("MT_TEST_PLAN");
  return path ? path : "";
}

// Expands its template launches and verifies `plan` (what readPlan and mtrun do); if it passes
// and is small, runs one step on the CPU backend.
void tryPlan(plan::Plan plan, Counts& counts) {
  ++counts.tried;
  try {
    expandTemplates(plan);
    verifyPlan(plan);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("invalid plan"), std::string::npos) << e.what();
    ++counts.rejected;
    return;
  }
  int64_t host_bytes = 0;
  for (const auto& t : plan.host_tensors()) host_bytes += hostTensorBytes(t);
  if (plan.arena_bytes() > (int64_t{1} << 28) || host_bytes > (int64_t{1} << 28)) {
    ++counts.rejected;  // valid but too large to execute in a test
    return;
  }
  try {
    HostStore store(plan);
    store.initialize(1);
    auto backend = createCpuBackend(plan, store);
    StepOptions options;
    options.grad_clip = 0.0;  // what any plan accepts (an on-arrival one cannot clip)
    backend->runStep(options);
    options.update = false;  // and a validation step: the loss prefixes alone (plan 1.9)
    options.loss_only = true;
    backend->runStep(options);
    ++counts.executed;
  } catch (const Error& e) {  // e.g. more memory than the machine has
    ++counts.rejected;
  }
}

// Expects the verifier to refuse `plan` with a message containing `wanted`.
void expectRejected(const plan::Plan& plan, const std::string& wanted) {
  test::expectError([&] { verifyPlan(plan); }, wanted);
}

plan::Plan parseOrEmpty(const std::string& bytes, bool* ok) {
  plan::Plan plan;
  *ok = plan.ParseFromString(bytes);
  return plan;
}

class PlanMutationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (planPath().empty()) GTEST_SKIP() << "MT_TEST_PLAN is not set (ctest sets it; it needs mtc)";
    original_ = readPlan(planPath());
    std::ifstream in(planPath(), std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});  // as stored: with its templates
    ASSERT_TRUE(stored_.ParseFromString(bytes_));
  }
  plan::Plan original_;  // expanded
  plan::Plan stored_;    // as written, launches and templates unexpanded
  std::string bytes_;
  std::mt19937_64 rng_{20261122};
};

TEST_F(PlanMutationTest, TheUnmutatedPlanVerifiesAndRuns) {
  Counts counts;
  tryPlan(original_, counts);
  EXPECT_EQ(counts.executed, 1);
}

// Issue 18 #2: a plan whose model batch (4096) disagreed with its tokens tensor ([2, 16])
// verified, and the data loader filled batch x seq tokens past the tensor. The verifier holds
// what the runtime derives from the header to the tensors it indexes.
TEST_F(PlanMutationTest, AModelShapeOtherThanTheTokensIsRejected) {
  for (const auto& [batch, seq] : {std::pair<int64_t, int64_t>{4096, 0}, {0, 4096}}) {
    plan::Plan plan = original_;
    if (batch) plan.mutable_model()->set_batch(batch);
    if (seq) plan.mutable_model()->set_seq(seq);
    try {
      verifyPlan(plan);
      ADD_FAILURE() << "a plan of batch " << plan.model().batch() << " x seq " << plan.model().seq() << " verified";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the tokens and targets must be (batch, seq)"), std::string::npos)
          << e.what();
    }
  }
}

TEST_F(PlanMutationTest, TruncatedPlansAreRejectedOrRun) {
  Counts counts;
  for (size_t len = 0; len < bytes_.size(); len += std::max<size_t>(1, bytes_.size() / 400)) {
    bool ok;
    plan::Plan plan = parseOrEmpty(bytes_.substr(0, len), &ok);
    if (ok) tryPlan(plan, counts);
  }
  std::printf("truncations: %d parsed, %d rejected, %d executed\n", counts.tried, counts.rejected, counts.executed);
  EXPECT_GT(counts.rejected, 0);
}

TEST_F(PlanMutationTest, ByteFlippedPlansAreRejectedOrRun) {
  Counts counts;
  int unparsable = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string mutated = bytes_;
    const int flips = 1 + static_cast<int>(rng_() % 4);
    for (int f = 0; f < flips; ++f) mutated[rng_() % mutated.size()] = static_cast<char>(rng_());
    bool ok;
    plan::Plan plan = parseOrEmpty(mutated, &ok);
    if (!ok) {
      ++unparsable;
      continue;
    }
    tryPlan(plan, counts);
  }
  std::printf("byte flips: 1500 inputs, %d unparsable, %d rejected, %d executed\n", unparsable, counts.rejected,
              counts.executed);
  EXPECT_GT(counts.rejected, 0);
}

// Edits aimed at each field the runtime indexes or sizes by.
TEST_F(PlanMutationTest, FieldEditsAreRejectedOrRun) {
  Counts counts;
  auto pick = [&](int n) { return n > 0 ? static_cast<int>(rng_() % n) : 0; };
  auto wild = [&]() -> int64_t {
    const int64_t choices[] = {-1, 0, 1, 63, 64, 1 << 20, int64_t{1} << 40, INT64_MAX, INT64_MIN,
                               static_cast<int64_t>(rng_() % 1000)};
    return choices[rng_() % std::size(choices)];
  };
  for (int i = 0; i < 1500; ++i) {
    plan::Plan plan = original_;
    switch (rng_() % 12) {
      case 0: plan.mutable_buffers(pick(plan.buffers_size()))->set_offset(wild()); break;
      case 1: {
        auto* b = plan.mutable_buffers(pick(plan.buffers_size()));
        if (b->shape_size()) b->set_shape(pick(b->shape_size()), wild());
        break;
      }
      case 2: plan.set_arena_bytes(wild()); break;
      case 3: plan.set_num_events(static_cast<uint32_t>(pick(plan.num_events() + 1))); break;
      case 4: {
        auto* t = plan.mutable_host_tensors(pick(plan.host_tensors_size()));
        if (t->shape_size()) t->set_shape(pick(t->shape_size()), wild());
        else t->add_shape(wild());
        break;
      }
      case 5: plan.mutable_host_tensors(pick(plan.host_tensors_size()))->set_param_index(static_cast<int32_t>(wild()));
        break;
      case 6: {  // roles up to RESIDUAL, dtypes up to I16 (plan 1.7)
        auto* t = plan.mutable_host_tensors(pick(plan.host_tensors_size()));
        if (rng_() % 2) t->set_role(static_cast<plan::HostRole>(pick(15)));
        else t->set_dtype(static_cast<plan::DType>(pick(4)));
        break;
      }
      case 7: plan.mutable_host_tensors(pick(plan.host_tensors_size()))->set_landing_offset(wild()); break;
      default: {
        auto* s = plan.mutable_streams(pick(plan.streams_size()));
        if (!s->instructions_size()) break;
        auto* in = s->mutable_instructions(pick(s->instructions_size()));
        const uint32_t value = static_cast<uint32_t>(wild());
        if (in->has_kernel()) {
          auto* k = in->mutable_kernel();
          // Wild floats (a softcap, plan 1.37, as any float attribute): NaN, infinities, zero, a
          // denormal, negative and huge values.
          const float floats[] = {std::nanf(""), INFINITY, -INFINITY, 0.0f, 1e-45f, -2.0f, 1e30f, 0.5f};
          const float wild_float = floats[rng_() % std::size(floats)];
          switch (rng_() % 7) {
            case 0: k->set_kernel(value % (kNumKernels + 3)); break;
            case 1: if (k->inputs_size()) k->set_inputs(pick(k->inputs_size()), value); break;
            case 2: if (k->outputs_size()) k->set_outputs(pick(k->outputs_size()), value); break;
            case 3: if (k->int_attrs_size()) k->set_int_attrs(pick(k->int_attrs_size()), wild()); break;
            case 4: if (k->float_attrs_size()) k->set_float_attrs(pick(k->float_attrs_size()), wild_float); break;
            case 5: k->add_float_attrs(wild_float); break;
            default: k->add_int_attrs(wild()); break;
          }
        } else if (in->has_copy()) {
          switch (rng_() % 3) {
            case 0: in->mutable_copy()->set_buffer(value); break;
            case 1: in->mutable_copy()->set_host_tensor(value); break;
            default: in->mutable_copy()->set_host_offset(wild()); break;  // plan 1.5: row slices
          }
        } else if (in->has_wait_event()) {
          in->set_wait_event(value % (plan.num_events() + 2));
        } else if (in->has_record_event()) {
          if (rng_() % 2) in->set_record_event(value % (plan.num_events() + 2));
          else s->mutable_instructions()->DeleteSubrange(pick(s->instructions_size()), 1);
        } else if (in->has_host_task()) {
          auto* t = in->mutable_host_task();
          if (rng_() % 4 == 0) t->set_kind(static_cast<plan::HostTask::Kind>(pick(7)));
          else if (rng_() % 8 == 0) t->set_accumulate(!t->accumulate());  // plan 1.6
          else if (rng_() % 8 == 0) t->set_padding_id(wild());  // plan 1.36
          else if (t->tensors_size()) t->set_tensors(pick(t->tensors_size()), value);
        }
      }
    }
    tryPlan(plan, counts);
  }
  std::printf("field edits: %d inputs, %d rejected, %d executed\n", counts.tried, counts.rejected, counts.executed);
  EXPECT_GT(counts.rejected, 500);
}

// Edits aimed at the block templates and their launches, before expansion.
TEST_F(PlanMutationTest, TemplateAndLaunchEditsAreRejectedOrRun) {
  std::vector<std::pair<int, int>> launches;  // (stream, instruction)
  for (int s = 0; s < stored_.streams_size(); ++s)
    for (int i = 0; i < stored_.streams(s).instructions_size(); ++i)
      if (stored_.streams(s).instructions(i).has_launch()) launches.emplace_back(s, i);
  if (launches.empty()) GTEST_SKIP() << "the test plan has no template launches";
  Counts counts;
  const uint32_t wild[] = {0, 1, 2, 7, 1000, 0xffffffffu};
  for (int trial = 0; trial < 600; ++trial) {
    plan::Plan plan = stored_;
    const auto [s, i] = launches[rng_() % launches.size()];
    plan::Launch* launch = plan.mutable_streams(s)->mutable_instructions(i)->mutable_launch();
    plan::BlockTemplate* tmpl = plan.mutable_templates(static_cast<int>(launch->block_template()));
    const uint32_t value = wild[rng_() % std::size(wild)];
    switch (rng_() % 8) {
      case 0: launch->set_block_template(value); break;
      case 1: if (launch->buffers_size()) launch->set_buffers(rng_() % launch->buffers_size(), value); break;
      case 2: if (launch->waits_size()) launch->mutable_waits(rng_() % launch->waits_size())->set_event(value); break;
      case 3: if (launch->waits_size()) launch->mutable_waits(rng_() % launch->waits_size())->set_at(value); break;
      case 4: if (launch->records_size()) launch->mutable_records(rng_() % launch->records_size())->set_at(value); break;
      case 5: launch->add_buffers(value); break;
      case 6: tmpl->set_num_buffers(value); break;
      case 7: {
        auto* in = tmpl->mutable_instructions(static_cast<int>(rng_() % tmpl->instructions_size()));
        if (rng_() % 2 && in->kernel().inputs_size()) in->mutable_kernel()->set_inputs(0, value);
        else in->set_wait_event(value);  // a wait inside a template: refused
        break;
      }
    }
    tryPlan(plan, counts);
  }
  std::printf("template edits: %d tried, %d rejected, %d executed\n", counts.tried, counts.rejected, counts.executed);
  EXPECT_GT(counts.rejected, 0);
}

TEST_F(PlanMutationTest, AWaitOnAnEventNeverRecordedIsADeadlockError) {
  plan::Plan plan = original_;
  for (auto& stream : *plan.mutable_streams())
    for (int i = stream.instructions_size() - 1; i >= 0; --i)
      if (stream.instructions(i).has_record_event() && stream.instructions(i).record_event() == 0)
        stream.mutable_instructions()->DeleteSubrange(i, 1);
  try {
    verifyPlan(plan);
    FAIL() << "a plan that deadlocks verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
}

// Plan 1.9's loss prefixes: what a validation step runs must be on every stream, inside it,
// copy the loss out and never wait for what it does not run.
TEST_F(PlanMutationTest, LossPrefixesAreCheckedLikeTheStepsThemselves) {
  int compute = -1, d2h = -1;
  for (int s = 0; s < original_.streams_size(); ++s) {
    ASSERT_TRUE(original_.streams(s).has_loss_prefix()) << "stream " << s;
    if (original_.streams(s).kind() == plan::Stream::COMPUTE) compute = s;
    if (original_.streams(s).kind() == plan::Stream::DEVICE_TO_HOST) d2h = s;
  }
  ASSERT_GE(compute, 0);
  ASSERT_GE(d2h, 0);
  plan::Plan past = original_;
  past.mutable_streams(0)->set_loss_prefix(past.streams(0).instructions_size() + 1);
  expectRejected(past, "past its instructions");
  plan::Plan some = original_;
  some.mutable_streams(1)->clear_loss_prefix();
  expectRejected(some, "loss prefixes on some streams only");
  plan::Plan no_loss = original_;
  no_loss.mutable_streams(d2h)->set_loss_prefix(0);
  expectRejected(no_loss, "do not copy the loss out");
  plan::Plan cut = original_;  // the loss's copy out waits for a kernel the run would not reach
  cut.mutable_streams(compute)->set_loss_prefix(0);
  expectRejected(cut, "a loss-only run deadlocks");
}

// The deferred update reads the previous step's gradients: after this step's norm they are
// overwritten; and a plan updates either one way or the other.
TEST_F(PlanMutationTest, TheDeferredUpdateMustPrecedeTheNormAndNotMixWithImmediateAdamw) {
  plan::Plan moved = original_;
  int found = -1;  // the stream
  for (int s = 0; s < moved.streams_size() && found < 0; ++s) {
    auto* instrs = moved.mutable_streams(s)->mutable_instructions();
    for (int i = 0; i < instrs->size() && found < 0; ++i) {
      if (!instrs->Get(i).has_host_task() || instrs->Get(i).host_task().kind() != plan::HostTask::ADAMW_PREVIOUS)
        continue;
      found = s;
      *instrs->Add() = instrs->Get(i);  // to the end: after the GRAD_NORM
      instrs->DeleteSubrange(i, 1);
    }
  }
  if (found < 0) GTEST_SKIP() << "the test plan does not defer its update";
  // The moved task as an ADAMW after the norm is in its place, but the others still defer.
  plan::Plan mixed = moved;
  auto* last = mixed.mutable_streams(found)->mutable_instructions();
  last->Mutable(last->size() - 1)->mutable_host_task()->set_kind(plan::HostTask::ADAMW);
  expectRejected(moved, "ADAMW_PREVIOUS after a GRAD_NORM task");
  expectRejected(mixed, "AdamW tasks of two kinds");
}

// Plan 1.28: a frozen parameter (mtc --frozen) has no gradient or moments, and only a parameter
// can be frozen.
TEST_F(PlanMutationTest, OnlyAParameterWithoutGradientOrMomentsIsFrozen) {
  int trained = -1, grad = -1;
  for (int i = 0; i < original_.host_tensors_size() && grad < 0; ++i)
    if (original_.host_tensors(i).role() == plan::ROLE_GRAD) grad = i, trained = original_.host_tensors(i).param_index();
  ASSERT_GE(grad, 0) << "the test plan trains nothing";
  plan::Plan frozen_with_state = original_;
  frozen_with_state.mutable_host_tensors(trained)->set_frozen(true);
  expectRejected(frozen_with_state, "belongs to frozen parameter '" + original_.host_tensors(trained).name() + "'");
  plan::Plan frozen_gradient = original_;
  frozen_gradient.mutable_host_tensors(grad)->set_frozen(true);
  expectRejected(frozen_gradient, "only a parameter can be frozen");
}

int gradientTensorOf(const plan::Plan& plan, uint32_t param) {
  for (int i = 0; i < plan.host_tensors_size(); ++i)
    if (plan.host_tensors(i).role() == plan::ROLE_GRAD && plan.host_tensors(i).param_index() == static_cast<int>(param))
      return i;
  return -1;
}

// The plan with each NORM_AND_ADAMW_ON_ARRIVAL task written as a plan 1.2/1.3 would: a GRAD_NORM
// of its gradients (unless `drop_norms`) and an ADAMW_ON_ARRIVAL.
plan::Plan asSeparateNormAndUpdate(const plan::Plan& fused, bool drop_norms) {
  plan::Plan out = fused;
  for (auto& stream : *out.mutable_streams()) {
    google::protobuf::RepeatedPtrField<plan::Instruction> rewritten;
    for (const auto& in : stream.instructions()) {
      if (in.has_host_task() && in.host_task().kind() == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL && !drop_norms) {
        auto* norm = rewritten.Add()->mutable_host_task();
        norm->set_kind(plan::HostTask::GRAD_NORM);
        for (uint32_t p : in.host_task().tensors()) norm->add_tensors(gradientTensorOf(fused, p));
      }
      *rewritten.Add() = in;
      if (in.has_host_task() && in.host_task().kind() == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL)
        rewritten.Mutable(rewritten.size() - 1)->mutable_host_task()->set_kind(plan::HostTask::ADAMW_ON_ARRIVAL);
    }
    *stream.mutable_instructions() = rewritten;
  }
  return out;
}

// An on-arrival update takes its gradient's norm share itself (plan 1.4), or, as plans 1.2/1.3
// wrote it, follows the GRAD_NORM task of its gradient; never both. A gradient must lie inside
// the landing buffer.
TEST_F(PlanMutationTest, OnArrivalUpdatesTakeEachNormOnceAndGradientsLieInTheLandingBuffer) {
  if (gradLandingTensor(original_) < 0) GTEST_SKIP() << "the test plan has no gradient landing buffer";
  ASSERT_EQ(planUpdateKind(original_), plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL);
  EXPECT_NO_THROW(verifyPlan(asSeparateNormAndUpdate(original_, false)));  // what 1.3 plans hold

  plan::Plan twice = original_, outside = original_;
  for (auto& stream : *twice.mutable_streams()) {
    auto* instrs = stream.mutable_instructions();
    for (int i = 0; i < instrs->size(); ++i)
      if (instrs->Get(i).has_host_task() &&
          instrs->Get(i).host_task().kind() == plan::HostTask::NORM_AND_ADAMW_ON_ARRIVAL) {
        auto* norm = instrs->Add()->mutable_host_task();
        norm->set_kind(plan::HostTask::GRAD_NORM);
        norm->add_tensors(gradientTensorOf(twice, instrs->Get(i).host_task().tensors(0)));
        for (int j = instrs->size() - 1; j > i; --j) instrs->SwapElements(j, j - 1);  // just before the update
        break;
      }
  }
  for (auto& t : *outside.mutable_host_tensors())
    if (t.role() == plan::ROLE_GRAD) {
      t.set_landing_offset(checkedNumel(outside.host_tensors(gradLandingTensor(outside)).shape(), "landing") * 4);
      break;
    }
  for (auto [plan, wanted] : {std::pair{asSeparateNormAndUpdate(original_, true), "before the GRAD_NORM task of its gradient"},
                              {twice, "after a GRAD_NORM task of its gradient (the norm would count it twice)"},
                              {outside, "does not lie inside the landing buffer"}}) {
    try {
      verifyPlan(plan);
      ADD_FAILURE() << "verified a plan that should fail with: " << wanted;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(wanted), std::string::npos) << e.what();
    }
  }
}

TEST_F(PlanMutationTest, ANewerMinorOrOtherMajorVersionIsRefusedWithBothVersions) {
  for (auto [major, minor] : {std::pair{kPlanVersionMajor + 1, 0u}, {kPlanVersionMajor, kPlanVersionMinor + 1}}) {
    plan::Plan plan = original_;
    plan.set_version_major(major);
    plan.set_version_minor(minor);
    const std::string path = test::scratchPath("version.plan");
    writePlan(plan, path);
    try {
      readPlan(path);
      FAIL() << "version " << major << "." << minor << " accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::to_string(major) + "." + std::to_string(minor)), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(kPlanVersionMajor) + "." + std::to_string(kPlanVersionMinor)),
                std::string::npos)
          << message;
    }
  }
}

}  // namespace
}  // namespace mt
