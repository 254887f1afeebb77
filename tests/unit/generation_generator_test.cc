// The Generator (server/generation/generator.h) on the tf-keras fixture models
// (models/scripts/make_generation_fixtures.py) served by the CPU engine: greedy equals Keras's
// greedy loop for 200 tokens, alone and with other generations in the same steps; seeded
// samples repeat; a model that is no language model is refused; a cancelled or expired
// generation ends before its next step.

#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/generation/generation_metrics.h"
#include "server/generation/generator.h"
#include "server/model_config.h"
#include "server/servable.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::engine {
// Names the parameter in test listings (ctest -N) instead of its bytes.
void PrintTo(EngineKind kind, std::ostream* os) {
  *os << (kind == EngineKind::kCuda ? "cuda" : "cpu");
}
}  // namespace rnnserve::engine

namespace rnnserve::server::generation {
namespace {

using testing::NoGpuReason;  // for RNNSERVE_SKIP_WITHOUT_GPU

nlohmann::json Expected(const std::string& model) {
  std::ifstream in(testing::SourcePath("tests/fixtures/generation/expected.json"));
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str())[model];
}

// `slots` > 0: served with cellular_batching of that many slots.
std::shared_ptr<const Servable> Load(const std::string& dir,
                                     engine::EngineKind kind = engine::EngineKind::kCpu,
                                     int slots = 0) {
  auto config = ReadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (kind == engine::EngineKind::kCuda) {
    config->mutable_instance_group(0)->set_kind(v1::ModelInstanceGroup::KIND_GPU);
  }
  if (slots > 0) config->mutable_cellular_batching()->set_max_active_sequences(slots);
  auto servable = Servable::Load(dir, 1, *config);
  EXPECT_TRUE(servable.ok()) << servable.status();
  return ShareServable(*std::move(servable));
}

std::shared_ptr<const Servable> LoadFixture(const std::string& model,
                                            engine::EngineKind kind = engine::EngineKind::kCpu,
                                            int slots = 0) {
  return Load(testing::SourcePath("tests/fixtures/generation/repo/" + model), kind, slots);
}

struct Result {
  std::vector<std::vector<int64_t>> ids;  // per sample
  std::vector<int32_t> order;             // the sample of each token, as they came
  std::vector<FinishReason> finished;
  absl::Status status;
};

Result Drain(Generation& g) {
  Result r;
  StepEvent event;
  while (g.Next(&event, absl::Seconds(60)) == Generation::Wait::kEvent) {
    for (const Token& t : event.tokens) {
      if (r.ids.size() <= static_cast<size_t>(t.sample)) r.ids.resize(t.sample + 1);
      r.ids[t.sample].push_back(t.id);
      r.order.push_back(t.sample);
    }
    for (const Finish& f : event.finished) r.finished.push_back(f.reason);
  }
  r.status = g.status();
  return r;
}

GenerateParams Greedy(const nlohmann::json& want, int64_t tokens) {
  GenerateParams p;
  p.prompt_text = want["prompt"].get<std::string>();
  p.max_tokens = tokens;
  return p;
}

// On each engine (the */Gpu instances are labelled gpu and skip without one).
class GeneratorTest : public ::testing::TestWithParam<engine::EngineKind> {
 protected:
  void SetUp() override {
    if (GetParam() == engine::EngineKind::kCuda) RNNSERVE_SKIP_WITHOUT_GPU();
  }
};

TEST_P(GeneratorTest, GreedyEqualsKerasGreedyLoopFor200Tokens) {
  for (const char* name : {"alice_lstm", "alice_window"}) {
    SCOPED_TRACE(name);
    auto model = LoadFixture(name, GetParam());
    ASSERT_NE(model, nullptr);
    const nlohmann::json want = Expected(name);
    auto generator = Generator::Create({});
    ASSERT_TRUE(generator.ok());
    // Four at once: their prompts run in one engine call, and each step's call carries all four
    // rows.
    std::vector<std::shared_ptr<Generation>> gens;
    for (int i = 0; i < 4; ++i) {
      auto g = (*generator)->Start(model, Greedy(want, 200), absl::InfiniteFuture());
      ASSERT_TRUE(g.ok()) << g.status();
      gens.push_back(*g);
    }
    const std::vector<int64_t> keras = want["greedy_ids"].get<std::vector<int64_t>>();
    // A longer prompt beside them (its prompt runs in a call of its own length): the prompt and
    // Keras's first 5 tokens continue as Keras's loop did.
    GenerateParams longer;
    longer.prompt_ids = want["prompt_ids"].get<std::vector<int64_t>>();
    longer.prompt_ids.insert(longer.prompt_ids.end(), keras.begin(), keras.begin() + 5);
    longer.max_tokens = 195;
    auto l = (*generator)->Start(model, longer, absl::InfiniteFuture());
    ASSERT_TRUE(l.ok()) << l.status();
    for (auto& g : gens) {
      const Result r = Drain(*g);
      ASSERT_TRUE(r.status.ok()) << r.status;
      ASSERT_EQ(r.ids.size(), 1u);
      EXPECT_EQ(r.ids[0], keras);
      EXPECT_EQ(r.finished, std::vector<FinishReason>{FinishReason::kLength});
    }
    const Result r = Drain(**l);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.ids.at(0), std::vector<int64_t>(keras.begin() + 5, keras.end()));
  }
}

// The same seed gives the same tokens on every engine: the CPU's here, the GPU's in the */Gpu
// instance, compared with the CPU engine's in the same process.
TEST_P(GeneratorTest, SeededSamplesRepeatAndMatchTheCpuEngine) {
  for (const char* name : {"alice_lstm", "alice_window"}) {
    SCOPED_TRACE(name);
    auto model = LoadFixture(name, GetParam());
    auto cpu = LoadFixture(name, engine::EngineKind::kCpu);
    ASSERT_TRUE(model != nullptr && cpu != nullptr);
    auto generator = Generator::Create({});
    ASSERT_TRUE(generator.ok());
    GenerateParams p = Greedy(Expected(name), 40);
    p.sampler = {.temperature = 1.0, .top_k = 0, .top_p = 0.9};
    p.seed = 1234;
    p.n = 4;
    auto a = (*generator)->Start(model, p, absl::InfiniteFuture());
    auto b = (*generator)->Start(model, p, absl::InfiniteFuture());
    auto c = (*generator)->Start(cpu, p, absl::InfiniteFuture());
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    const Result ra = Drain(**a), rb = Drain(**b), rc = Drain(**c);
    ASSERT_EQ(ra.ids.size(), 4u);
    EXPECT_EQ(ra.ids, rb.ids);
    EXPECT_EQ(ra.ids, rc.ids);
    EXPECT_NE(ra.ids[0], ra.ids[1]);
  }
}

// A stateful LM served with cellular batching generates in the scheduler's slots: each sample
// holds a slot from its prompt to its last token, its sampled token fed back (with one slot, a
// generation's second sample starts when the first ends, where the worker steps both at once).
// Greedy is still Keras's loop; seeded samples are the worker's, token for token.
TEST_P(GeneratorTest, InCellularSlotsGreedyEqualsKerasAndSamplesEqualTheWorkers) {
  const nlohmann::json want = Expected("alice_lstm");
  const std::vector<int64_t> keras = want["greedy_ids"].get<std::vector<int64_t>>();
  auto one_slot = LoadFixture("alice_lstm", GetParam(), 1);
  ASSERT_TRUE(one_slot != nullptr && one_slot->cellular() != nullptr);
  auto generator = Generator::Create({});
  ASSERT_TRUE(generator.ok());
  GenerateParams two = Greedy(want, 200);
  two.n = 2;
  auto g = (*generator)->Start(one_slot, two, absl::InfiniteFuture());
  ASSERT_TRUE(g.ok()) << g.status();
  Result r = Drain(**g);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.ids.size(), 2u);
  EXPECT_EQ(r.ids[0], keras);
  EXPECT_EQ(r.ids[1], keras);
  std::vector<int32_t> in_turn(200, 0);
  in_turn.resize(400, 1);
  EXPECT_EQ(r.order, in_turn);
  // Eight slots: four generations side by side, and a longer prompt among them.
  auto model = LoadFixture("alice_lstm", GetParam(), 8);
  ASSERT_NE(model, nullptr);
  std::vector<std::shared_ptr<Generation>> gens;
  for (int i = 0; i < 4; ++i) {
    auto started = (*generator)->Start(model, Greedy(want, 200), absl::InfiniteFuture());
    ASSERT_TRUE(started.ok()) << started.status();
    gens.push_back(*started);
  }
  GenerateParams longer;
  longer.prompt_ids = want["prompt_ids"].get<std::vector<int64_t>>();
  longer.prompt_ids.insert(longer.prompt_ids.end(), keras.begin(), keras.begin() + 5);
  longer.max_tokens = 195;
  auto l = (*generator)->Start(model, longer, absl::InfiniteFuture());
  ASSERT_TRUE(l.ok()) << l.status();
  for (auto& started : gens) {
    r = Drain(*started);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.ids.at(0), keras);
    EXPECT_EQ(r.finished, std::vector<FinishReason>{FinishReason::kLength});
  }
  r = Drain(**l);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.ids.at(0), std::vector<int64_t>(keras.begin() + 5, keras.end()));
  // Seeded samples: the same tokens as the worker's loop on the CPU engine.
  auto cpu = LoadFixture("alice_lstm");
  ASSERT_TRUE(cpu != nullptr && cpu->cellular() == nullptr);
  GenerateParams p = Greedy(want, 40);
  p.sampler = {.temperature = 1.0, .top_k = 0, .top_p = 0.9};
  p.seed = 1234;
  p.n = 4;
  auto a = (*generator)->Start(model, p, absl::InfiniteFuture());
  auto c = (*generator)->Start(cpu, p, absl::InfiniteFuture());
  ASSERT_TRUE(a.ok() && c.ok());
  const Result ra = Drain(**a), rc = Drain(**c);
  ASSERT_EQ(ra.ids.size(), 4u);
  EXPECT_EQ(ra.ids, rc.ids);
  EXPECT_NE(ra.ids[0], ra.ids[1]);
}

INSTANTIATE_TEST_SUITE_P(Engines, GeneratorTest,
                         ::testing::Values(engine::EngineKind::kCpu, engine::EngineKind::kCuda),
                         [](const ::testing::TestParamInfo<engine::EngineKind>& info) {
                           return std::string(info.param == engine::EngineKind::kCuda ? "Gpu"
                                                                                      : "Cpu");
                         });

TEST(GeneratorRefuses, AModelThatIsNoLanguageModel) {
  auto model = Load(testing::SourcePath("models/examples/waveform_lstm"));
  auto generator = Generator::Create({});
  GenerateParams p;
  p.prompt_ids = {1, 2};
  p.max_tokens = 3;
  auto g = (*generator)->Start(model, p, absl::InfiniteFuture());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(g.status().message().find("waveform_lstm cannot generate"), std::string::npos)
      << g.status();
}

TEST(GeneratorRefuses, BadRequestsAndTooManyGenerations) {
  auto model = LoadFixture("alice_window");
  auto generator = Generator::Create({.limits = {.max_tokens = 100000}, .max_active = 1});
  ASSERT_TRUE(generator.ok());
  GenerateParams p;
  p.prompt_ids = std::vector<int64_t>(17, 1);
  p.max_tokens = 10;
  auto g = (*generator)->Start(model, p, absl::InfiniteFuture());
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("window of 16 tokens"), std::string::npos) << g.status();
  p.prompt_ids = {1};
  p.max_tokens = 100001;
  EXPECT_NE((*generator)
                ->Start(model, p, absl::InfiniteFuture())
                .status()
                .message()
                .find("expected 1 to 100000"),
            std::string::npos);
  // A refused request held no place: one generation runs (long enough to be running still),
  // and a second is refused until the first ends.
  p.max_tokens = 100000;
  auto first = (*generator)->Start(model, p, absl::InfiniteFuture());
  ASSERT_TRUE(first.ok());
  const absl::Status second = (*generator)->Start(model, p, absl::InfiniteFuture()).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  (*first)->Cancel();
  EXPECT_EQ(Drain(**first).status.code(), absl::StatusCode::kCancelled);
  p.max_tokens = 3;
  EXPECT_TRUE((*generator)->Start(model, p, absl::InfiniteFuture()).ok());
  EXPECT_EQ(Generator::Create({.max_active = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GeneratorEnds, CancelledAndExpiredGenerationsBeforeTheirNextStep) {
  auto model = LoadFixture("alice_lstm");
  auto generator = Generator::Create({});
  GenerateParams p = Greedy(Expected("alice_lstm"), 4000);
  auto g = (*generator)->Start(model, p, absl::InfiniteFuture());
  ASSERT_TRUE(g.ok());
  StepEvent event;
  ASSERT_EQ((*g)->Next(&event, absl::Seconds(60)), Generation::Wait::kEvent);
  (*g)->Cancel();
  const Result r = Drain(**g);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
  EXPECT_LT(r.ids.empty() ? 0 : r.ids[0].size(), 4000u);
  auto expired = (*generator)->Start(model, p, absl::Now() - absl::Seconds(1));
  ASSERT_TRUE(expired.ok());
  EXPECT_EQ(Drain(**expired).status.code(), absl::StatusCode::kDeadlineExceeded);
  // The generator goes on serving.
  auto after =
      (*generator)->Start(model, Greedy(Expected("alice_lstm"), 5), absl::InfiniteFuture());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(Drain(**after).status.ok());
}

// In slots, a cancelled generation leaves its slot before the next chunk (the one slot then
// runs the next generation); one still running when the generator goes ends as cancelled.
TEST(GeneratorEnds, InSlotsCancelledFreesTheSlotAndShutdownCancelsTheRest) {
  auto model = LoadFixture("alice_lstm", engine::EngineKind::kCpu, 1);
  ASSERT_TRUE(model != nullptr && model->cellular() != nullptr);
  auto generator = Generator::Create({});
  GenerateParams endless = Greedy(Expected("alice_lstm"), 4000);
  auto g = (*generator)->Start(model, endless, absl::InfiniteFuture());
  ASSERT_TRUE(g.ok());
  StepEvent event;
  ASSERT_EQ((*g)->Next(&event, absl::Seconds(60)), Generation::Wait::kEvent);
  (*g)->Cancel();
  Result r = Drain(**g);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
  EXPECT_LT(r.ids.empty() ? 0 : r.ids[0].size(), 4000u);
  auto after =
      (*generator)->Start(model, Greedy(Expected("alice_lstm"), 5), absl::InfiniteFuture());
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(Drain(**after).status.ok());
  auto last = (*generator)->Start(model, endless, absl::InfiniteFuture());
  ASSERT_TRUE(last.ok());
  ASSERT_EQ((*last)->Next(&event, absl::Seconds(60)), Generation::Wait::kEvent);
  generator->reset();
  r = Drain(**last);
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.finished, std::vector<FinishReason>{FinishReason::kCancelled});
  model->cellular()->Drain();
  EXPECT_EQ(model->cellular()->active(), 0);
}

TEST(GenerationMetricsTest, CountTokensAndTimeTheFirstAndEachToken) {
  auto model = LoadFixture("alice_lstm");
  GenerationMetrics metrics;
  auto generator = Generator::Create({});
  (*generator)->SetObserver([&](const GenerationStats& s) { metrics.Record(s); });
  GenerateParams p = Greedy(Expected("alice_lstm"), 5);
  p.n = 2;
  auto g = (*generator)->Start(model, p, absl::InfiniteFuture());
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(Drain(**g).status.ok());
  const std::string text = metrics.ExpositionText();
  EXPECT_NE(text.find("rnnserve_generated_tokens_total{model=\"alice_lstm\",version=\"1\"} 10"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rnnserve_generations_total{model=\"alice_lstm\",version=\"1\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("rnnserve_generation_time_to_first_token_seconds_count{model=\"alice_lstm\","
                      "version=\"1\"} 1"),
            std::string::npos);
  EXPECT_NE(text.find("rnnserve_generation_time_per_token_seconds_count{model=\"alice_lstm\","
                      "version=\"1\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace rnnserve::server::generation
