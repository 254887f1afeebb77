// Servable on a fake engine (tests/unit/batching_fake_engine.h): both run paths (the dynamic
// batcher, and the caller's thread without one), the metrics they record (once per request and
// engine call, never for the load's probes), engine faults, and the batch-axis check at load.
// No model file and no real kernels.

#include <google/protobuf/text_format.h>

#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "engine/cpu/panel_gemm.h"
#include "gtest/gtest.h"
#include "server/batching/batching_config.h"
#include "server/metrics/server_metrics.h"
#include "server/model_config.h"
#include "server/servable.h"
#include "tests/unit/batching_fake_engine.h"

namespace rnnserve::testing {
namespace {

using server::Servable;
using server::ServableOptions;

v1::ModelConfig Config(const std::string& text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

constexpr char kUnbatched[] = R"pb(
  name: "fake"
  max_batch_size: 0
  instance_group { kind: KIND_CPU count: 1 })pb";
constexpr char kBatched[] = R"pb(
  name: "fake"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 100 }
  instance_group { kind: KIND_CPU count: 1 })pb";

// B rows of T steps of [first, 0]: row b starts with first + b, then 1, 2, ...
engine::Batch Rows(int64_t B, int64_t T, float first) {
  engine::Tensor x = engine::Tensor::Float({B, T, 2});  // [B, T, 2]
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      x.f32()[(b * T + t) * 2] = t == 0 ? first + static_cast<float>(b) : static_cast<float>(t);
    }
  }
  engine::Batch batch;
  batch.inputs.push_back(std::move(x));
  return batch;
}

// The metrics in the text exposition format, as a scrape sees them.
std::string MetricsText(const server::metrics::ServerMetrics& m) { return m.ExpositionText(); }

class ServableTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& config) {
    return Servable::FromModel(FakeEngineFactory::Model(), 1, Config(config),
                               {.engine_factory = engines_.Factory(), .metrics = &metrics_});
  }
  FakeEngineFactory engines_;
  server::metrics::ServerMetrics metrics_;
};

TEST_F(ServableTest, SignatureComesFromTheModelAndTheLoadProbes) {
  auto servable = Load(kUnbatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ASSERT_EQ((*servable)->inputs().size(), 1u);
  EXPECT_EQ((*servable)->inputs()[0].shape, (engine::Shape{-1, -1, 2}));
  ASSERT_EQ((*servable)->outputs().size(), 2u);
  EXPECT_EQ((*servable)->outputs()[0].name, "echo");
  EXPECT_EQ((*servable)->outputs()[0].shape, (engine::Shape{-1, -1, 1}));
  EXPECT_EQ((*servable)->outputs()[1].shape, (engine::Shape{-1, 2}));
  ASSERT_EQ((*servable)->instances().size(), 1u);
  EXPECT_EQ((*servable)->instances()[0].engine, "fake");
  EXPECT_EQ((*servable)->batcher(), nullptr);
}

TEST_F(ServableTest, CpuWeightsReachTheCpuEngineAndTheMetadataNamesThem) {
  for (const auto& [name, mode, path] : {std::tuple{"FP32", engine::CpuWeights::kFp32, "fp32"},
                                         std::tuple{"BF16", engine::CpuWeights::kBf16, "bf16 ("},
                                         std::tuple{"INT8", engine::CpuWeights::kInt8, "int8 ("}}) {
    SCOPED_TRACE(name);
    auto servable = Load(absl::StrCat(kUnbatched, " optimization { cpu_weights: ", name, " }"));
    ASSERT_TRUE(servable.ok()) << servable.status();
    const int last = engines_.instances() - 1;
    EXPECT_EQ(engines_.options(last).cpu_weights, mode);
    EXPECT_TRUE(
        absl::StrContains((*servable)->instances()[0].reason, absl::StrCat("CPU weights: ", path)))
        << (*servable)->instances()[0].reason;
  }
}

TEST_F(ServableTest, GpuGraphsSettingReachesTheEngine) {
  for (const auto& [setting, want] :
       {std::pair{"", true}, std::pair{" optimization { gpu_graphs: GPU_GRAPHS_ON }", true},
        std::pair{" optimization { gpu_graphs: GPU_GRAPHS_OFF }", false}}) {
    SCOPED_TRACE(setting);
    auto servable = Load(absl::StrCat(kUnbatched, setting));
    ASSERT_TRUE(servable.ok()) << servable.status();
    EXPECT_EQ(engines_.options(engines_.instances() - 1).whole_batch_graphs, want);
  }
  const auto bad = server::ParseModelConfig("optimization { gpu_graphs: 7 }", "config.pbtxt");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "optimization.gpu_graphs")) << bad.status();
}

// The engine settings main.cc reads from the environment (RNNSERVE_CPU_KERNELS,
// RNNSERVE_GPU_MODEL_GRAPHS=0) reach every instance's engine and compile options; the engine
// reads no environment variable itself.
TEST_F(ServableTest, ProcessEngineSettingsReachEveryInstance) {
  std::vector<engine::EngineOptions> created;
  auto factory = engines_.Factory();
  auto servable = Servable::FromModel(
      FakeEngineFactory::Model(), 1,
      Config(absl::StrCat(kUnbatched, " optimization { gpu_graphs: GPU_GRAPHS_ON }")),
      {.engine_factory =
           [&](const engine::EngineOptions& o) {
             created.push_back(o);
             return factory(o);
           },
       .cpu_kernels = "plain",
       .whole_batch_graphs = false});
  ASSERT_TRUE(servable.ok()) << servable.status();
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].cpu_kernels, "plain");
  EXPECT_FALSE(engines_.options(engines_.instances() - 1).whole_batch_graphs);
}

// The kernel set the CPU engine picked at run time (CPUID, or RNNSERVE_CPU_KERNELS) is in the
// metadata and the load log.
TEST_F(ServableTest, MetadataNamesTheCpuKernelSetThatRuns) {
  const auto set = engine::cpu::ActiveCpuKernelSet();
  ASSERT_TRUE(set.ok()) << set.status();
  auto servable = Load(kUnbatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_TRUE(absl::StrContains((*servable)->instances()[0].reason,
                                absl::StrCat("CPU kernels: ", engine::cpu::CpuKernelSetName(*set))))
      << (*servable)->instances()[0].reason;
}

TEST_F(ServableTest, UnbatchedRunAnswersEachRowWithItsOwnLength) {
  auto servable = Load(kUnbatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  const int calls_at_load = engines_.instance(0).calls();
  engine::Batch batch = Rows(2, 4, 10);
  batch.lengths = {4, 2};
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*servable)->Run(batch, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  // summary: {length, sum of x[., t, 0] over the length}
  EXPECT_EQ(out[1].f32()[0], 4);
  EXPECT_EQ(out[1].f32()[1], 10 + 1 + 2 + 3);
  EXPECT_EQ(out[1].f32()[2], 2);
  EXPECT_EQ(out[1].f32()[3], 11 + 1);
  EXPECT_EQ(engines_.instance(0).calls(), calls_at_load + 1);
}

TEST_F(ServableTest, UnbatchedRunSplitsABatchLargerThanMaxBatchSize) {
  auto servable = Load(R"pb(name: "fake"
                            max_batch_size: 2
                            instance_group { kind: KIND_CPU count: 1 })pb");
  ASSERT_TRUE(servable.ok()) << servable.status();
  const int calls_at_load = engines_.instance(0).calls();
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*servable)->Run(Rows(5, 3, 0), &out).ok());
  EXPECT_EQ(engines_.instance(0).calls(), calls_at_load + 3);  // rows 2 + 2 + 1
  ASSERT_EQ(out[1].shape(), (engine::Shape{5, 2}));
  for (int b = 0; b < 5; ++b) EXPECT_EQ(out[1].f32()[b * 2 + 1], b + 1 + 2) << "row " << b;
}

TEST_F(ServableTest, BatchedRunJoinsRequestsThatQueueWhileTheInstanceIsBusy) {
  auto servable = Load(kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ASSERT_NE((*servable)->batcher(), nullptr);
  FakeEngine& engine = engines_.instance(0);
  const int calls_at_load = engine.calls();
  engine.Gate();  // the first request holds the only instance until Open()
  std::vector<std::vector<engine::Tensor>> out(3);
  std::vector<absl::Status> status(3);
  std::vector<std::thread> callers;
  callers.emplace_back([&] { status[0] = (*servable)->Run(Rows(1, 3, 100), &out[0]); });
  engine.AwaitCalls(calls_at_load + 1);
  for (int i = 1; i < 3; ++i) {
    callers.emplace_back(
        [&, i] { status[i] = (*servable)->Run(Rows(1, 3, 100.0f * (i + 1)), &out[i]); });
  }
  while ((*servable)->batcher()->counters().queued_requests < 2) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  engine.Open();
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(status[i].ok()) << i << ": " << status[i];
    EXPECT_EQ(out[i][1].f32()[1], 100.0f * (i + 1) + 1 + 2) << "request " << i;
  }
  const std::vector<SeenBatch> seen = engine.seen();
  ASSERT_EQ(static_cast<int>(seen.size()), calls_at_load + 2);
  EXPECT_EQ(seen.back().input_shape[0], 2);  // the two queued requests, in one engine call
}

// Each run path records every request's queue wait once and every engine call once, and the
// load's probes not at all.
class ServableMetricsTest : public ServableTest,
                            public ::testing::WithParamInterface<const char*> {};

TEST_P(ServableMetricsTest, EachRequestAndEngineCallIsRecordedOnce) {
  auto servable = Load(GetParam());
  ASSERT_TRUE(servable.ok()) << servable.status();
  for (int i = 0; i < 3; ++i) {
    std::vector<engine::Tensor> out;
    ASSERT_TRUE((*servable)->Run(Rows(2, 3, 0), &out).ok());
  }
  // The batcher reports an engine call after delivering its outputs: wait for the reports.
  if ((*servable)->batcher() != nullptr) (*servable)->batcher()->Drain();
  const std::string text = MetricsText(metrics_);
  for (const char* line : {
           "rnnserve_model_loaded{model=\"fake\",version=\"1\"} 1",
           "rnnserve_queue_depth{model=\"fake\",version=\"1\"} 0",
           "rnnserve_queue_duration_seconds_count{model=\"fake\",version=\"1\"} 3",
           "rnnserve_batch_size_count{model=\"fake\",version=\"1\"} 3",
           "rnnserve_batch_size_sum{model=\"fake\",version=\"1\"} 6",
           "rnnserve_batch_timesteps_real_total{model=\"fake\",version=\"1\"} 18",
           "rnnserve_compute_duration_seconds_count{engine=\"fake\",model=\"fake\",version=\"1\"} "
           "3",
       }) {
    EXPECT_TRUE(absl::StrContains(text, line)) << line << "\nin:\n" << text;
  }
}

TEST_P(ServableMetricsTest, WithoutMetricsNothingIsRecordedAndRunsServe) {
  auto servable = Servable::FromModel(FakeEngineFactory::Model(), 1, Config(GetParam()),
                                      {.engine_factory = engines_.Factory()});
  ASSERT_TRUE(servable.ok()) << servable.status();
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*servable)->Run(Rows(1, 3, 0), &out).ok());
  EXPECT_FALSE(absl::StrContains(MetricsText(metrics_), "model=\"fake\""));
}

// A fault that a test batch confirms takes the instance out of rotation: with one instance,
// later requests are UNAVAILABLE at once instead of waiting for it.
TEST_P(ServableMetricsTest, LastingEngineFaultRetiresTheInstance) {
  auto servable = Load(GetParam());
  ASSERT_TRUE(servable.ok()) << servable.status();
  FakeEngine& engine = engines_.instance(0);
  engine.FailInternal(-1);
  const int calls_at_fault = engine.calls();
  std::vector<engine::Tensor> out;
  EXPECT_EQ((*servable)->Run(Rows(1, 3, 0), &out).code(), absl::StatusCode::kInternal);
  const absl::Status after = (*servable)->Run(Rows(1, 3, 0), &out);
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_EQ(engine.calls(), calls_at_fault + 2);  // the request and the test batch; no more
}

TEST_P(ServableMetricsTest, TransientEngineFaultKeepsTheInstance) {
  auto servable = Load(GetParam());
  ASSERT_TRUE(servable.ok()) << servable.status();
  engines_.instance(0).FailInternal(1);
  std::vector<engine::Tensor> out;
  EXPECT_EQ((*servable)->Run(Rows(1, 3, 0), &out).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE((*servable)->Run(Rows(1, 3, 0), &out).ok());
}

INSTANTIATE_TEST_SUITE_P(BothRunPaths, ServableMetricsTest, ::testing::Values(kUnbatched, kBatched),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param == kBatched ? "DynamicBatcher"
                                                                     : "CallersThread");
                         });

TEST_F(ServableTest, MaxBatchSizeForAModelWithoutABatchAxisFailsTheLoadNamingTheFix) {
  FakeEngineFactory broken([](FakeEngine& e) { e.DropARow(); });  // axis 0 is not the rows
  auto servable = Servable::FromModel(FakeEngineFactory::Model(), 1,
                                      Config(R"pb(name: "fake"
                                                  max_batch_size: 8
                                                  instance_group { kind: KIND_CPU })pb"),
                                      {.engine_factory = broken.Factory()});
  ASSERT_FALSE(servable.ok());
  EXPECT_EQ(servable.status().code(), absl::StatusCode::kFailedPrecondition);
  for (const char* part : {"model 'fake' v1: max_batch_size 8", "output 'echo'",
                           "axis 0 is not the batch axis", "set max_batch_size: 0"}) {
    EXPECT_TRUE(absl::StrContains(servable.status().message(), part))
        << part << " in " << servable.status();
  }
}

TEST_F(ServableTest, MaxBatchSizeZeroServesAModelWithoutABatchAxis) {
  FakeEngineFactory broken([](FakeEngine& e) { e.DropARow(); });
  auto servable = Servable::FromModel(FakeEngineFactory::Model(), 1, Config(kUnbatched),
                                      {.engine_factory = broken.Factory()});
  EXPECT_TRUE(servable.ok()) << servable.status();
}

// Servable::RunAsync, the gRPC callback handlers' way in: where each answer is made.
struct AsyncAnswer {
  absl::Notification done;
  std::thread::id thread;
  absl::StatusOr<std::vector<engine::Tensor>> result;
};

std::shared_ptr<AsyncAnswer> RunAsync(const Servable& servable, engine::Batch batch) {
  auto answer = std::make_shared<AsyncAnswer>();
  servable.RunAsync(std::move(batch), {},
                    [answer](absl::StatusOr<std::vector<engine::Tensor>> result) {
                      answer->thread = std::this_thread::get_id();
                      answer->result = std::move(result);
                      answer->done.Notify();
                    });
  return answer;
}

class ServableRunAsyncTest : public ServableTest,
                             public ::testing::WithParamInterface<const char*> {};

TEST_P(ServableRunAsyncTest, ShortCallsOnAnIdleInstanceRunOnTheCallersThread) {
  auto servable = Load(GetParam());
  ASSERT_TRUE(servable.ok()) << servable.status();
  auto a = RunAsync(**servable, Rows(2, 3, 10));
  ASSERT_TRUE(a->done.HasBeenNotified());  // no hand-off: answered inside RunAsync
  EXPECT_EQ(a->thread, std::this_thread::get_id());
  ASSERT_TRUE(a->result.ok()) << a->result.status();
  ASSERT_EQ(a->result->size(), 2u);
  EXPECT_EQ((*a->result)[1].f32()[0], 3.0f);  // row 0's length
}

// Once the engine's calls take longer than the run-on-caller budget, a caller never waits
// for one: another thread runs it and answers.
TEST_P(ServableRunAsyncTest, LongCallsRunOnAnotherThreadAndTheCallerReturnsAtOnce) {
  auto servable = Load(GetParam());
  ASSERT_TRUE(servable.ok()) << servable.status();
  FakeEngine& engine = engines_.instance(0);
  engine.Delay(absl::Milliseconds(5));
  RunAsync(**servable, Rows(1, 3, 10))->done.WaitForNotification();  // 5 ms: long from now on
  engine.Gate();
  auto second = RunAsync(**servable, Rows(1, 3, 20));  // would block here if it ran here
  engine.AwaitCalls(2);
  EXPECT_FALSE(second->done.HasBeenNotified());
  engine.Open();
  second->done.WaitForNotification();
  EXPECT_NE(second->thread, std::this_thread::get_id());
  ASSERT_TRUE(second->result.ok()) << second->result.status();
  EXPECT_EQ((*second->result)[0].f32()[0], 20.0f);
}

// A version unloaded while its request runs: the answer holds the last reference, on the
// servable's own thread, whose destruction joins that thread. It is destroyed elsewhere.
TEST_P(ServableRunAsyncTest, AnswerHoldingTheLastReferenceDestroysTheServableElsewhere) {
  auto loaded = Load(GetParam());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::shared_ptr<const Servable> servable = server::ShareServable(*std::move(loaded));
  FakeEngine& engine = engines_.instance(0);
  engine.Delay(absl::Milliseconds(5));
  RunAsync(*servable, Rows(1, 3, 10))->done.WaitForNotification();
  engine.Gate();
  absl::Notification answered, destroyed;
  engine.NotifyOnDestruction(&destroyed);
  servable->RunAsync(
      Rows(1, 3, 20), {},
      [keep = servable, &answered](absl::StatusOr<std::vector<engine::Tensor>> result) mutable {
        EXPECT_TRUE(result.ok()) << result.status();
        keep.reset();
        answered.Notify();
      });
  servable.reset();  // the repository lets go of the version
  engine.AwaitCalls(2);
  engine.Open();
  answered.WaitForNotification();
  // Destroyed (its instances are the last of it to go, after the workers were joined), and
  // not on the worker's thread, which the destruction joins.
  EXPECT_TRUE(destroyed.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// A model on GPU instances runs a batch on the caller's thread as a CPU model does, while its
// calls are short and an instance is idle; a budget of zero hands every batch to the worker.
TEST_F(ServableTest, GpuModelsRunOnTheCallerUnlessTheBudgetIsZero) {
  constexpr char kGpuBatched[] = R"pb(
    name: "fake"
    max_batch_size: 8
    dynamic_batching {}
    instance_group { kind: KIND_GPU count: 1 })pb";
  for (const bool zero_budget : {false, true}) {
    SCOPED_TRACE(zero_budget ? "budget 0" : "default");
    FakeEngineFactory engines;
    ServableOptions options{.engine_factory = engines.Factory()};
    if (zero_budget) options.run_on_caller_budget = absl::ZeroDuration();
    auto servable =
        Servable::FromModel(FakeEngineFactory::Model(), 1, Config(kGpuBatched), options);
    ASSERT_TRUE(servable.ok()) << servable.status();
    ASSERT_EQ((*servable)->instances()[0].kind, "KIND_GPU");
    auto a = RunAsync(**servable, Rows(1, 3, 10));
    a->done.WaitForNotification();
    EXPECT_EQ(a->thread == std::this_thread::get_id(), !zero_budget);
  }
}

// The bound on padding defaults to 1.1 on CPU instances and kGpuMaxComputedStepsRatio on GPU
// instances; config.pbtxt's parameter wins on either.
TEST_F(ServableTest, PaddingBoundDefaultsByInstanceKindAndTheConfigWins) {
  struct Case {
    const char* kind;
    const char* parameter;  // "" when the config leaves it out
    double want;
  };
  const Case cases[] = {{"KIND_CPU", "", 1.1},
                        {"KIND_GPU", "", server::batching::kGpuMaxComputedStepsRatio},
                        {"KIND_GPU", "1.5", 1.5},
                        {"KIND_CPU", "0", 0.0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.kind, " parameter '", c.parameter, "'"));
    std::string text = absl::StrCat("name: \"fake\" max_batch_size: 8 dynamic_batching {} ",
                                    "instance_group { kind: ", c.kind, " count: 1 }");
    if (*c.parameter != '\0') {
      absl::StrAppend(&text, " parameters { key: \"max_computed_steps_ratio\" value: \"",
                      c.parameter, "\" }");
    }
    FakeEngineFactory engines;
    auto servable = Servable::FromModel(FakeEngineFactory::Model(), 1, Config(text.c_str()),
                                        {.engine_factory = engines.Factory()});
    ASSERT_TRUE(servable.ok()) << servable.status();
    ASSERT_NE((*servable)->batcher(), nullptr);
    EXPECT_DOUBLE_EQ((*servable)->batcher()->options().max_computed_steps_ratio, c.want);
  }
}

// With ServableOptions::completions, an answer the batcher's worker produced is delivered on
// the completion threads, not the worker's.
TEST_F(ServableTest, AnswersTheWorkerProducedAreDeliveredOnTheCompletionThreads) {
  server::batching::AsyncRunner completions(2);
  auto servable =
      Servable::FromModel(FakeEngineFactory::Model(), 1, Config(kBatched),
                          {.engine_factory = engines_.Factory(), .completions = &completions});
  ASSERT_TRUE(servable.ok()) << servable.status();
  FakeEngine& engine = engines_.instance(0);
  engine.Delay(absl::Milliseconds(5));
  RunAsync(**servable, Rows(1, 3, 10))->done.WaitForNotification();  // long from now on
  bool on_completion_thread = false;
  absl::Notification answered;
  (*servable)->RunAsync(Rows(1, 3, 20), {},
                        [&](absl::StatusOr<std::vector<engine::Tensor>> result) {
                          EXPECT_TRUE(result.ok()) << result.status();
                          on_completion_thread = completions.IsRunnerThread();
                          answered.Notify();
                        });
  answered.WaitForNotification();
  EXPECT_TRUE(on_completion_thread);
}

INSTANTIATE_TEST_SUITE_P(BothRunPaths, ServableRunAsyncTest,
                         ::testing::Values(kUnbatched, kBatched),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param == kBatched ? "DynamicBatcher"
                                                                     : "InstanceRunner");
                         });

}  // namespace
}  // namespace rnnserve::testing
