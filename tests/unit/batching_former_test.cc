// BatchFormer, the batcher's decisions without threads: each test stands on the exact time of
// a boundary and one microsecond before it.

#include "server/batching/batch_former.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve::testing {
namespace {

using server::batching::BatchFormer;
using server::batching::BatchRequest;
using server::batching::DynamicBatcherOptions;
using server::batching::FormedBatch;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);
absl::Time At(int64_t us) { return kT0 + absl::Microseconds(us); }

// Triton's waiting rule, which most tests below pin down; WorkConserving() is the default.
DynamicBatcherOptions Options() {
  return {.model_name = "m",
          .max_batch_size = 4,
          .wait_when_idle = true,
          .max_queue_delay_us = 10,
          .input_time_axis = {true},
          .output_time_axis = {true, false}};
}

DynamicBatcherOptions WorkConserving() {
  DynamicBatcherOptions o = Options();
  o.wait_when_idle = false;
  o.max_queue_delay_us = 1'000'000;  // plays no part: a test would hang on it
  o.preferred_batch_sizes = {2};
  return o;
}

// Adds a request; the answer lands in *answer when the test completes it.
absl::Status Add(BatchFormer& f, const RequestSpec& spec, absl::Time now,
                 std::shared_ptr<Answer>* answer = nullptr) {
  std::shared_ptr<Answer> a;
  std::unique_ptr<BatchRequest> r = MakeRequest(spec, &a);
  if (answer != nullptr) *answer = a;
  return f.Add(&r, now);
}

// x[b, 0, 0] of each row of the batch: which request rows it holds.
std::vector<float> Rows(const FormedBatch& batch) {
  std::vector<float> ids;
  for (const auto& r : batch.rows)
    ids.push_back(Value(0, r.row, 0) + r.request->inputs().inputs[0].f32()[0]);
  return ids;
}

TEST(BatchFormerTest, DelayExpiryFormsTheBatchAtExactlyMaxQueueDelay) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  EXPECT_EQ(f.NextEventTime(), At(10));
  EXPECT_FALSE(f.TakeBatch(At(9), false).has_value());
  std::optional<FormedBatch> batch = f.TakeBatch(At(10), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100}));
  EXPECT_EQ(batch->queue_durations, (std::vector<absl::Duration>{absl::Microseconds(10)}));
  EXPECT_EQ(f.queued_requests(), 0);
  EXPECT_EQ(f.NextEventTime(), absl::InfiniteFuture());
}

TEST(BatchFormerTest, DelayCountsFromTheHeadsArrival) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200}, At(6)).ok());
  EXPECT_FALSE(f.TakeBatch(At(9), false).has_value());
  auto batch = f.TakeBatch(At(10), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100, 200}));
}

TEST(BatchFormerTest, ZeroDelayFormsABatchFromWhatIsQueued) {
  DynamicBatcherOptions o = Options();
  o.max_queue_delay_us = 0;
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200}, At(0)).ok());
  auto batch = f.TakeBatch(At(0), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100, 200}));
}

TEST(BatchFormerTest, MaxBatchSizeReachedFormsTheBatchWithoutWaiting) {
  BatchFormer f(Options());
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(Add(f, {.id = 100.0f * i}, At(0)).ok());
  EXPECT_FALSE(f.TakeBatch(At(0), false).has_value());
  ASSERT_TRUE(Add(f, {.id = 400}, At(1)).ok());
  auto batch = f.TakeBatch(At(1), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100, 200, 300, 400}));
}

TEST(BatchFormerTest, FullBatchTakesMaxBatchSizeRowsAndLeavesTheRest) {
  BatchFormer f(Options());
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(Add(f, {.id = 100.0f * i}, At(0)).ok());
  auto batch = f.TakeBatch(At(0), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(batch->rows.size(), 4u);
  EXPECT_EQ(f.queued_requests(), 1);
  EXPECT_FALSE(f.TakeBatch(At(9), false).has_value());
  auto rest = f.TakeBatch(At(10), false);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(Rows(*rest), (std::vector<float>{500}));
}

TEST(BatchFormerTest, PreferredBatchSizeFormsWithoutWaiting) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  o.preferred_batch_sizes = {2, 3};
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  EXPECT_FALSE(f.TakeBatch(At(0), false).has_value());
  ASSERT_TRUE(Add(f, {.id = 200}, At(1)).ok());
  auto two = f.TakeBatch(At(1), false);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(Rows(*two), (std::vector<float>{100, 200}));
}

TEST(BatchFormerTest, PreferredBatchSizeTakesTheLargestReachedAndLeavesTheRest) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  o.preferred_batch_sizes = {2, 3};
  BatchFormer f(o);
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(Add(f, {.id = 100.0f * i}, At(0)).ok());
  auto three = f.TakeBatch(At(0), false);
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(Rows(*three), (std::vector<float>{100, 200, 300}));
  EXPECT_FALSE(f.TakeBatch(At(9), false).has_value());
  auto one = f.TakeBatch(At(10), false);
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(Rows(*one), (std::vector<float>{400}));
}

TEST(BatchFormerTest, DeadlinePassedInTheQueueExpiresTheRequestBeforeAnyBatch) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100, .deadline = At(5)}, At(0)).ok());
  EXPECT_EQ(f.NextEventTime(), At(5));
  EXPECT_TRUE(f.TakeExpired(At(4)).empty());
  auto expired = f.TakeExpired(At(5));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0]->inputs().inputs[0].f32()[0], 100);
  EXPECT_EQ(f.queued_requests(), 0);
  EXPECT_FALSE(f.TakeBatch(At(10), false).has_value());
}

TEST(BatchFormerTest, DefaultTimeoutBoundsTheWaitAndARequestDeadlineCanOnlyShortenIt) {
  DynamicBatcherOptions o = Options();
  o.max_queue_delay_us = 1000;
  o.default_timeout_us = 20;
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200, .deadline = At(50)}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 300, .deadline = At(7)}, At(0)).ok());
  EXPECT_TRUE(f.TakeExpired(At(6)).empty());
  EXPECT_EQ(f.TakeExpired(At(7)).size(), 1u);
  EXPECT_TRUE(f.TakeExpired(At(19)).empty());
  EXPECT_EQ(f.TakeExpired(At(20)).size(), 2u);
}

TEST(BatchFormerTest, PastDeadlineIsRefusedAndTheCallerKeepsTheRequest) {
  BatchFormer f(Options());
  std::shared_ptr<Answer> a;
  auto r = MakeRequest({.id = 100, .deadline = At(3)}, &a);
  const absl::Status s = f.Add(&r, At(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(a->done.HasBeenNotified());
}

TEST(BatchFormerTest, FullQueueIsResourceExhaustedAndTheCallerKeepsTheRequest) {
  DynamicBatcherOptions o = Options();
  o.max_queue_size = 2;
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200}, At(0)).ok());
  std::shared_ptr<Answer> a;
  auto r = MakeRequest({.id = 300}, &a);
  const absl::Status s = f.Add(&r, At(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("max_queue_size 2"), std::string::npos) << s;
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(a->done.HasBeenNotified());
  // A place frees when a batch takes a request.
  ASSERT_TRUE(f.TakeBatch(At(10), false).has_value());
  EXPECT_TRUE(f.Add(&r, At(10)).ok());
  EXPECT_EQ(r, nullptr);
}

TEST(BatchFormerTest, HigherPriorityLevelIsServedFirst) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 1;
  o.priority_levels = 3;
  o.default_priority_level = 2;
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100, .priority = 0}, At(0)).ok());  // default: level 2
  ASSERT_TRUE(Add(f, {.id = 200, .priority = 3}, At(1)).ok());
  ASSERT_TRUE(Add(f, {.id = 300, .priority = 1}, At(2)).ok());
  ASSERT_TRUE(Add(f, {.id = 400, .priority = 2}, At(3)).ok());
  std::vector<float> order;
  while (auto batch = f.TakeBatch(At(3), false)) order.push_back(Rows(*batch)[0]);
  EXPECT_EQ(order, (std::vector<float>{300, 100, 400, 200}));
}

// Adds a request of `caller` (BatchRequest::caller).
absl::Status AddAs(BatchFormer& f, const std::string& caller, const RequestSpec& spec,
                   absl::Time now) {
  std::shared_ptr<Answer> a;
  std::unique_ptr<BatchRequest> r = MakeRequest(spec, &a);
  r->caller = caller;
  return f.Add(&r, now);
}

TEST(BatchFormerTest, CallersTakeTurnsSoAFloodDoesNotQueueAheadOfAnotherCaller) {
  DynamicBatcherOptions o = WorkConserving();
  o.max_batch_size = 1;
  BatchFormer f(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(AddAs(f, "flood", {.id = 100.f * (i + 1)}, At(i)).ok());
  auto first = f.TakeBatch(At(4), false);  // the flood's first request runs
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(Rows(*first), (std::vector<float>{100}));
  ASSERT_TRUE(AddAs(f, "polite", {.id = 1000}, At(5)).ok());
  ASSERT_TRUE(AddAs(f, "polite", {.id = 2000}, At(6)).ok());
  std::vector<float> order;
  while (auto batch = f.TakeBatch(At(7), false)) order.push_back(Rows(*batch)[0]);
  // The polite caller is next (it had nothing queued), then the two take turns.
  EXPECT_EQ(order, (std::vector<float>{1000, 200, 2000, 300, 400}));
}

TEST(BatchFormerTest, ABatchIsFilledWithTheCallersRequestsInTurn) {
  DynamicBatcherOptions o = WorkConserving();
  o.max_batch_size = 4;
  BatchFormer f(o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(AddAs(f, "a", {.id = 100.f * (i + 1)}, At(i)).ok());
  ASSERT_TRUE(AddAs(f, "b", {.id = 1000}, At(4)).ok());
  auto batch = f.TakeBatch(At(5), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100, 1000, 200, 300}));
}

TEST(BatchFormerTest, PriorityOrdersACallersOwnRequestsAndTakesNoOtherCallersTurn) {
  DynamicBatcherOptions o = WorkConserving();
  o.max_batch_size = 1;
  o.priority_levels = 2;
  o.default_priority_level = 2;
  BatchFormer f(o);
  ASSERT_TRUE(AddAs(f, "a", {.id = 100}, At(0)).ok());
  ASSERT_TRUE(AddAs(f, "a", {.id = 200}, At(1)).ok());
  ASSERT_TRUE(AddAs(f, "b", {.id = 1000}, At(2)).ok());
  ASSERT_TRUE(AddAs(f, "a", {.id = 300, .priority = 1}, At(3)).ok());
  std::vector<float> order;
  while (auto batch = f.TakeBatch(At(4), false)) order.push_back(Rows(*batch)[0]);
  // a's level 1 goes before a's level 2, in a's turn; b's turn comes before a's second.
  EXPECT_EQ(order, (std::vector<float>{300, 1000, 100, 200}));
}

TEST(BatchFormerTest, LowerPriorityRowsFillABatchBehindHigherOnes) {
  DynamicBatcherOptions o = Options();
  o.priority_levels = 2;
  o.default_priority_level = 2;
  BatchFormer f(o);
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200, .priority = 1}, At(1)).ok());
  auto batch = f.TakeBatch(At(11), false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{200, 100}));
}

TEST(BatchFormerTest, PriorityOutsideTheLevelsIsInvalidArgument) {
  DynamicBatcherOptions o = Options();
  o.priority_levels = 3;
  o.default_priority_level = 2;
  BatchFormer f(o);
  absl::Status s = Add(f, {.id = 100, .priority = 4}, At(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("priority must be in [0, 3]"), std::string::npos) << s;
  BatchFormer single(Options());
  s = Add(single, {.id = 100, .priority = 1}, At(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("has no priority levels"), std::string::npos) << s;
}

TEST(BatchFormerTest, OversizedRequestIsSplitAcrossBatchesInRowOrder) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100, .rows = 10}, At(0)).ok());
  auto first = f.TakeBatch(At(0), false);
  auto second = f.TakeBatch(At(0), false);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(Rows(*first), (std::vector<float>{100, 101, 102, 103}));
  EXPECT_EQ(Rows(*second), (std::vector<float>{104, 105, 106, 107}));
  EXPECT_EQ(first->queue_durations.size(), 1u);
  EXPECT_TRUE(second->queue_durations.empty());  // the request started in the first batch
  EXPECT_FALSE(f.TakeBatch(At(9), false).has_value());
  auto last = f.TakeBatch(At(10), false);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(Rows(*last), (std::vector<float>{108, 109}));
  EXPECT_EQ(f.queued_requests(), 0);
}

TEST(BatchFormerTest, OversizedRequestTailJoinsTheNextRequest) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100, .rows = 6}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200, .rows = 2}, At(0)).ok());
  auto first = f.TakeBatch(At(0), false);
  auto second = f.TakeBatch(At(0), false);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(Rows(*second), (std::vector<float>{104, 105, 200, 201}));
  EXPECT_EQ(second->requests, 2);
}

// One row per request, of these lengths, all at time 0; every batch until the queue is empty.
std::vector<FormedBatch> FormAll(const DynamicBatcherOptions& o, const std::vector<int>& lengths) {
  BatchFormer f(o);
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_TRUE(Add(f, {.id = 100.0f * (i + 1), .steps = lengths[i]}, At(0)).ok());
  }
  std::vector<FormedBatch> batches;
  while (auto b = f.TakeBatch(At(0), /*flush=*/true)) batches.push_back(std::move(*b));
  return batches;
}

TEST(BatchFormerTest, LengthBucketsKeepComputedStepsWithinTenPercentOfReal) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  const std::vector<int> lengths = {100, 10, 98, 12, 95, 11, 500, 11};
  const std::vector<FormedBatch> batches = FormAll(o, lengths);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(Rows(batches[0]), (std::vector<float>{100, 300, 500}));       // 100, 98, 95
  EXPECT_EQ(Rows(batches[1]), (std::vector<float>{200, 400, 600, 800}));  // 10, 12, 11, 11
  EXPECT_EQ(Rows(batches[2]), (std::vector<float>{700}));                 // 500
  int64_t real = 0, computed = 0;
  for (const FormedBatch& b : batches) {
    EXPECT_LE(b.computed_steps * 10, b.real_steps * 11)
        << b.computed_steps << " computed for " << b.real_steps << " real";
    real += b.real_steps;
    computed += b.computed_steps;
  }
  EXPECT_EQ(real, 837);
  EXPECT_EQ(computed, 3 * 100 + 4 * 12 + 500);
}

TEST(BatchFormerTest, WithoutAStepBoundAllLengthsShareOneBatch) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 8;
  o.max_computed_steps_ratio = 0;
  const std::vector<FormedBatch> batches = FormAll(o, {100, 10, 98, 12, 95, 11, 500, 11});
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].real_steps, 837);
  EXPECT_EQ(batches[0].computed_steps, 8 * 500);
}

TEST(BatchFormerTest, ManyUniformLengthsKeepComputedStepsWithinTheBound) {
  DynamicBatcherOptions o = Options();
  o.max_batch_size = 16;
  std::vector<int> lengths;
  uint32_t seed = 12345;
  for (int i = 0; i < 400; ++i) {
    seed = seed * 1664525u + 1013904223u;
    lengths.push_back(10 + static_cast<int>((seed >> 8) % 491));  // 10..500
  }
  const std::vector<FormedBatch> batches = FormAll(o, lengths);
  int64_t real = 0, computed = 0, rows = 0;
  for (const FormedBatch& b : batches) {
    EXPECT_LE(b.computed_steps * 10, b.real_steps * 11);
    real += b.real_steps;
    computed += b.computed_steps;
    rows += static_cast<int64_t>(b.rows.size());
  }
  EXPECT_EQ(rows, 400);
  EXPECT_LE(static_cast<double>(computed), 1.1 * static_cast<double>(real));
  EXPECT_LT(batches.size(), 200u) << "buckets should still batch";
}

TEST(BatchFormerTest, RowsOfOneRequestGoToTheBucketsTheirLengthsFit) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100, .rows = 3, .steps = 40, .lengths = {40, 12, 38}}, At(0)).ok());
  auto first = f.TakeBatch(At(10), false);
  auto second = f.TakeBatch(At(10), false);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(Rows(*first), (std::vector<float>{100, 102}));
  EXPECT_EQ(Rows(*second), (std::vector<float>{101}));
  EXPECT_EQ(first->real_steps, 78);
  EXPECT_EQ(first->computed_steps, 80);
}

TEST(BatchFormerTest, InputsOfDifferentFeatureSizesNeverShareABatch) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100, .features = 2}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 200, .features = 3}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 300, .features = 2}, At(0)).ok());
  auto first = f.TakeBatch(At(10), false);
  auto second = f.TakeBatch(At(10), false);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(Rows(*first), (std::vector<float>{100, 300}));
  EXPECT_EQ(Rows(*second), (std::vector<float>{200}));
}

TEST(BatchFormerTest, InconsistentRequestIsInvalidArgumentNamingTheProblem) {
  BatchFormer f(Options());
  absl::Status s = Add(f, {.id = 100, .rows = 2, .steps = 4, .lengths = {4}}, At(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("lengths: 1 given for a batch of 2"), std::string::npos) << s;
  s = Add(f, {.id = 100, .rows = 1, .steps = 4, .lengths = {5}}, At(0));
  EXPECT_NE(s.message().find("lengths[0] = 5: must be in [0, 4]"), std::string::npos) << s;
  s = Add(f, {.id = 100, .rows = 0}, At(0));
  EXPECT_NE(s.message().find("empty batch"), std::string::npos) << s;
  std::shared_ptr<Answer> a;
  auto r = MakeRequest({.id = 100}, &a);
  r->batch.inputs.push_back(engine::Tensor::Float({2, 4}));
  s = f.Add(&r, At(0));
  EXPECT_NE(s.message().find("takes 1 input(s); the request has 2"), std::string::npos) << s;
  EXPECT_EQ(f.queued_requests(), 0);
}

TEST(BatchFormerTest, WorkConservingFormsABatchOfOneAtItsArrivalTime) {
  BatchFormer f(WorkConserving());
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  auto batch = f.TakeBatch(At(0), /*flush=*/false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100}));
  EXPECT_EQ(batch->queue_durations, (std::vector<absl::Duration>{absl::ZeroDuration()}));
  EXPECT_EQ(f.NextEventTime(), absl::InfiniteFuture());
}

TEST(BatchFormerTest, WorkConservingTakesEverythingQueuedPastThePreferredSize) {
  BatchFormer f(WorkConserving());  // preferred size 2 does not cut the batch
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(Add(f, {.id = 100.0f * i}, At(i)).ok());
  auto batch = f.TakeBatch(At(3), /*flush=*/false);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100, 200, 300}));
}

TEST(BatchFormerTest, WorkConservingKeepsMaxBatchSizeAndTheLengthBuckets) {
  BatchFormer f(WorkConserving());
  for (int i = 1; i <= 5; ++i) ASSERT_TRUE(Add(f, {.id = 100.0f * i}, At(0)).ok());
  ASSERT_TRUE(Add(f, {.id = 900, .steps = 40}, At(0)).ok());
  auto first = f.TakeBatch(At(0), false);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(Rows(*first), (std::vector<float>{100, 200, 300, 400}));  // max_batch_size 4
  auto second = f.TakeBatch(At(0), false);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(Rows(*second), (std::vector<float>{500}));  // 40 steps beside 4: another bucket
  auto third = f.TakeBatch(At(0), false);
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(Rows(*third), (std::vector<float>{900}));
}

TEST(BatchFormerTest, WorkConservingStillExpiresDeadlinesFirst) {
  BatchFormer f(WorkConserving());
  std::shared_ptr<Answer> a;
  ASSERT_TRUE(Add(f, {.id = 100, .deadline = At(5)}, At(0), &a).ok());
  EXPECT_EQ(f.NextEventTime(), At(5));
  EXPECT_EQ(f.TakeExpired(At(5)).size(), 1u);
  EXPECT_FALSE(f.TakeBatch(At(5), false).has_value());
}

TEST(BatchFormerTest, FlushFormsWhatIsQueuedAtOnce) {
  BatchFormer f(Options());
  ASSERT_TRUE(Add(f, {.id = 100}, At(0)).ok());
  EXPECT_FALSE(f.TakeBatch(At(0), false).has_value());
  auto batch = f.TakeBatch(At(0), true);
  ASSERT_TRUE(batch.has_value());
  EXPECT_EQ(Rows(*batch), (std::vector<float>{100}));
}

}  // namespace
}  // namespace rnnserve::testing
