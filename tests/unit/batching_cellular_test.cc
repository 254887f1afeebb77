// Step-level (cellular) batching with the fake engine: which sequences each chunk advances,
// when sequences join and leave, and that a sequence's answer is what it would be run whole.

#include "server/batching/cellular_scheduler.h"

#include <atomic>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/batching_fake_engine.h"
#include "tests/unit/batching_test_util.h"

namespace rnnserve {
namespace {

using server::batching::CellularScheduler;
using server::batching::CellularSchedulerOptions;
using server::batching::ChunkStats;
using testing::Answer;
using testing::FakeEngine;
using testing::MakeRequest;
using testing::RequestSpec;
using testing::Value;

CellularSchedulerOptions Options(int slots, int chunk_steps) {
  CellularSchedulerOptions o;
  o.model_name = "fake";
  o.max_active_sequences = slots;
  o.chunk_steps = chunk_steps;
  o.shape.input_time_axis = {true};
  o.shape.output_time_axis = {true, false};  // echo [B, T, 1], summary [B, 2]
  o.shape.state_rows["rnn"] = {{1}};
  return o;
}

// The steps of each row a chunk advanced: lengths as the engine saw them.
std::vector<int32_t> Lengths(const testing::SeenBatch& b) { return b.lengths; }

std::shared_ptr<Answer> Submit(CellularScheduler& s, const RequestSpec& spec) {
  std::shared_ptr<Answer> answer;
  auto request = MakeRequest(spec, &answer);
  EXPECT_TRUE(s.Schedule(&request).ok());
  return answer;
}

// Echo of a row as step-level batching answers it: x up to the length, then the last step
// repeated (zeros for an empty sequence).
void ExpectEcho(const Answer& answer, const RequestSpec& spec) {
  ASSERT_TRUE(answer.result.ok()) << answer.result.status();
  const engine::Tensor& echo = (*answer.result)[0];
  ASSERT_EQ(echo.shape(), (engine::Shape{spec.rows, spec.steps, 1}));
  for (int64_t b = 0; b < spec.rows; ++b) {
    const int64_t L = spec.lengths.empty() ? spec.steps : spec.lengths[b];
    for (int64_t t = 0; t < spec.steps; ++t) {
      const float want = L == 0 ? 0.0f : Value(spec.id, b, std::min(t, L - 1));
      EXPECT_FLOAT_EQ(echo.f32()[b * spec.steps + t], want) << "row " << b << " step " << t;
    }
  }
}

TEST(CellularSchedulerTest, SequencesOfARequestRunInSlotsAndAnswerAsIfRunWhole) {
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(8, 4), {&engine});
  ASSERT_TRUE(s.ok()) << s.status();
  std::map<std::string, std::vector<engine::Tensor>> states;
  RequestSpec spec{.id = 100,
                   .rows = 3,
                   .steps = 9,
                   .lengths = {5, 0, 9},
                   .initial_h = {0.5f, -1.0f, 2.0f},
                   .final_states = &states};
  auto answer = Submit(**s, spec);
  answer->done.WaitForNotification();
  ExpectEcho(*answer, spec);
  ASSERT_EQ(states["rnn"].size(), 1u);
  for (int64_t b = 0; b < 3; ++b) {
    EXPECT_FLOAT_EQ(states["rnn"][0].f32()[b], testing::FinalH(spec, b)) << "row " << b;
  }
  // Chunks of 4 steps: rows 5, 0 and 9 long advance {4, 0, 4}, then {1, 4}, then {1}.
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(Lengths(seen[0]), (std::vector<int32_t>{4, 0, 4}));
  EXPECT_EQ(Lengths(seen[1]), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(Lengths(seen[2]), (std::vector<int32_t>{1}));
  EXPECT_EQ(answer->calls, 1);
}

TEST(CellularSchedulerTest, NewSequenceJoinsTheRunningBatchAtTheNextChunk) {
  FakeEngine engine;
  engine.Gate();
  auto s = CellularScheduler::Create(Options(8, 4), {&engine});
  ASSERT_TRUE(s.ok());
  const RequestSpec long_spec{.id = 100, .steps = 20};
  auto long_answer = Submit(**s, long_spec);
  engine.AwaitCalls(1);  // the long one's first chunk runs, alone
  const RequestSpec short_spec{.id = 200, .steps = 3};
  auto short_answer = Submit(**s, short_spec);
  engine.Open();
  short_answer->done.WaitForNotification();
  long_answer->done.WaitForNotification();
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 5u);  // 20 steps in chunks of 4
  EXPECT_EQ(seen[0].first_steps, (std::vector<float>{100}));
  EXPECT_EQ(Lengths(seen[1]), (std::vector<int32_t>{4, 3}));
  EXPECT_EQ(seen[1].first_steps[1], 200);
  EXPECT_EQ(seen[2].first_steps.size(), 1u);
  ExpectEcho(*short_answer, short_spec);
  ExpectEcho(*long_answer, long_spec);
}

TEST(CellularSchedulerTest, SlotsBoundEachChunkAndQueuedSequencesTakeFreedSlots) {
  FakeEngine engine;
  engine.Gate();
  auto s = CellularScheduler::Create(Options(2, 4), {&engine});
  ASSERT_TRUE(s.ok());
  auto blocker = Submit(**s, {.id = 100, .steps = 4});
  engine.AwaitCalls(1);
  const RequestSpec three{.id = 200, .rows = 3, .steps = 8};
  auto answer = Submit(**s, three);
  EXPECT_EQ((*s)->queued(), 3);
  engine.Open();
  answer->done.WaitForNotification();
  const auto seen = engine.seen();
  // Chunk 2: rows 0 and 1 take both slots; row 2 waits until they leave after chunk 3.
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[1].first_steps, (std::vector<float>{200, 201}));
  EXPECT_EQ(seen[3].first_steps, (std::vector<float>{202}));
  ExpectEcho(*answer, three);
}

TEST(CellularSchedulerTest, AFreedSlotStartsItsNextSequenceFromItsOwnStates) {
  // One slot, used in turn by sequences with and without initial states: each ends where it
  // would alone (its own initial state, or zeros), never at what the slot held before.
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(1, 3), {&engine});
  ASSERT_TRUE(s.ok()) << s.status();
  std::map<std::string, std::vector<engine::Tensor>> states[3];
  const RequestSpec specs[3] = {
      {.id = 100, .steps = 7, .initial_h = {40.0f}, .final_states = &states[0]},
      {.id = 200, .steps = 5, .final_states = &states[1]},
      {.id = 300, .steps = 2, .initial_h = {-3.0f}, .final_states = &states[2]}};
  for (int i = 0; i < 3; ++i) {
    auto answer = Submit(**s, specs[i]);
    answer->done.WaitForNotification();
    ExpectEcho(*answer, specs[i]);
    ASSERT_EQ(states[i]["rnn"].size(), 1u) << "request " << i;
    EXPECT_FLOAT_EQ(states[i]["rnn"][0].f32()[0], testing::FinalH(specs[i], 0)) << "request " << i;
  }
}

TEST(CellularSchedulerTest, DeadlineDropsASequenceFromItsSlot) {
  server::batching::FakeClock clock;
  FakeEngine engine;
  engine.Gate();
  auto s = CellularScheduler::Create(Options(8, 2), {&engine}, &clock);
  ASSERT_TRUE(s.ok());
  auto late =
      Submit(**s, {.id = 100, .steps = 10, .deadline = clock.Now() + absl::Microseconds(10)});
  engine.AwaitCalls(1);  // its first chunk runs; then its deadline passes
  auto fine = Submit(**s, {.id = 200, .steps = 4});
  clock.AdvanceMicros(11);
  engine.Open();
  late->done.WaitForNotification();
  fine->done.WaitForNotification();
  EXPECT_EQ(late->result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(fine->result.ok());
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 3u);  // the late one's first chunk, then the other one's two
  EXPECT_EQ(seen[1].first_steps, (std::vector<float>{200}));
  EXPECT_EQ(seen[2].first_steps, (std::vector<float>{Value(200, 0, 2)}));  // from step 2 on
}

TEST(CellularSchedulerTest, CancelledCallLeavesItsSlotAtTheNextChunk) {
  FakeEngine engine;
  engine.Gate();
  auto s = CellularScheduler::Create(Options(8, 2), {&engine});
  ASSERT_TRUE(s.ok());
  std::atomic<bool> cancelled{false};
  std::shared_ptr<Answer> gone;
  auto request = MakeRequest({.id = 100, .steps = 10}, &gone);
  request->cancelled = [&cancelled] { return cancelled.load(); };
  ASSERT_TRUE((*s)->Schedule(&request).ok());
  engine.AwaitCalls(1);  // its first chunk runs; then its client cancels
  auto stays = Submit(**s, {.id = 200, .steps = 4});
  cancelled = true;
  engine.Open();
  gone->done.WaitForNotification();
  stays->done.WaitForNotification();
  EXPECT_EQ(gone->result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(stays->result.ok());
  const auto seen = engine.seen();
  ASSERT_EQ(seen.size(), 3u);  // the cancelled one's first chunk, then the other one's two
  EXPECT_EQ(seen[1].first_steps, (std::vector<float>{200}));
}

TEST(CellularSchedulerTest, EngineFaultFailsTheChunksRequestsAndLaterOnesRun) {
  FakeEngine engine;
  engine.FailInternal(1);
  auto s = CellularScheduler::Create(Options(8, 4), {&engine});
  ASSERT_TRUE(s.ok());
  auto failed = Submit(**s, {.id = 100, .steps = 4});
  failed->done.WaitForNotification();
  EXPECT_EQ(failed->result.status().code(), absl::StatusCode::kInternal);
  const RequestSpec next{.id = 200, .steps = 6};
  auto answer = Submit(**s, next);
  answer->done.WaitForNotification();
  ExpectEcho(*answer, next);
}

TEST(CellularSchedulerTest, FullQueueIsResourceExhaustedAndTheRequestStaysWithTheCaller) {
  FakeEngine engine;
  engine.Gate();
  CellularSchedulerOptions o = Options(1, 4);
  o.max_queue_size = 2;
  auto s = CellularScheduler::Create(o, {&engine});
  ASSERT_TRUE(s.ok());
  auto running = Submit(**s, {.id = 100, .steps = 4});
  engine.AwaitCalls(1);
  auto queued = Submit(**s, {.id = 200, .rows = 2, .steps = 4});
  std::shared_ptr<Answer> refused;
  auto request = MakeRequest({.id = 300, .steps = 4}, &refused);
  const absl::Status st = (*s)->Schedule(&request);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(request, nullptr);
  engine.Open();
  queued->done.WaitForNotification();
  EXPECT_TRUE(queued->result.ok());
}

TEST(CellularSchedulerTest, ObserverSeesEachChunkAndFirstSteps) {
  FakeEngine engine;
  auto s = CellularScheduler::Create(Options(4, 3), {&engine});
  ASSERT_TRUE(s.ok());
  std::vector<ChunkStats> chunks;
  absl::Mutex mu;
  (*s)->SetObserver([&](const ChunkStats& c) {
    absl::MutexLock lock(&mu);
    chunks.push_back(c);
  });
  auto answer = Submit(**s, {.id = 100, .rows = 2, .steps = 5, .lengths = {5, 2}});
  answer->done.WaitForNotification();
  (*s)->Drain();
  absl::MutexLock lock(&mu);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].active, 2);
  EXPECT_EQ(chunks[0].capacity, 4);
  EXPECT_EQ(chunks[0].steps, 3);
  EXPECT_EQ(chunks[0].real_steps, 5);  // 3 + 2
  EXPECT_EQ(chunks[0].finished, 1);
  EXPECT_EQ(chunks[0].first_step_latencies.size(), 2u);
  EXPECT_EQ(chunks[1].active, 1);
  EXPECT_EQ(chunks[1].steps, 2);
  EXPECT_EQ((*s)->active(), 0);
}

TEST(CellularSchedulerTest, OptionsAreCheckedAtCreate) {
  FakeEngine engine;
  CellularSchedulerOptions o = Options(0, 4);
  EXPECT_EQ(CellularScheduler::Create(o, {&engine}).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(4, 0);
  EXPECT_EQ(CellularScheduler::Create(o, {&engine}).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options(4, 4);
  o.shape.input_time_axis = {false};
  EXPECT_EQ(CellularScheduler::Create(o, {&engine}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CellularScheduler::Create(Options(4, 4), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CellularSchedulerTest, UnloadFailsWhatIsQueuedWithUnavailable) {
  FakeEngine engine;
  engine.Gate();
  std::shared_ptr<Answer> running, queued;
  {
    auto s = CellularScheduler::Create(Options(1, 4), {&engine});
    ASSERT_TRUE(s.ok());
    running = Submit(**s, {.id = 100, .steps = 8});
    engine.AwaitCalls(1);
    queued = Submit(**s, {.id = 200, .steps = 4});
    engine.Open();
  }
  // Each is answered once: with its outputs if it ran before the unload, else UNAVAILABLE.
  for (const auto& a : {running, queued}) {
    EXPECT_TRUE(a->done.HasBeenNotified());
    EXPECT_EQ(a->calls, 1);
    EXPECT_TRUE(a->result.ok() || a->result.status().code() == absl::StatusCode::kUnavailable)
        << a->result.status();
  }
}

}  // namespace
}  // namespace rnnserve
