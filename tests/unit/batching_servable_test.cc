// The example Keras model loaded with dynamic batching: concurrent callers of Servable::Run,
// each with its own rows and lengths, get Keras's numbers for exactly their rows.

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/servable.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using server::RunOptions;
using server::Servable;

constexpr char kBatchingConfig[] = R"pb(
  name: "waveform_lstm"
  platform: "keras_h5"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 2000 }
  instance_group { kind: KIND_CPU count: 2 }
)pb";

v1::ModelConfig Config(const std::string& text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

absl::StatusOr<std::unique_ptr<Servable>> LoadExample(const std::string& config) {
  return Servable::Load(SourcePath("models/examples/waveform_lstm"), 1, Config(config));
}

// Rows `rows` of the Keras fixture, cut to the longest of their lengths.
struct Case {
  std::vector<int> rows;
  bool give_lengths = false;
};

engine::Batch CaseBatch(const Case& c) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");      // [3, 40, 2]
  const client::NpyArray len = LoadNpy("tests/fixtures/example/lengths.npy");  // [3]
  int64_t T = 0;
  for (int r : c.rows) T = std::max<int64_t>(T, static_cast<int64_t>(len.values[r]));
  const auto B = static_cast<int64_t>(c.rows.size());
  engine::Tensor t = engine::Tensor::Float({B, T, 2});
  engine::Batch batch;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T * 2; ++i) {
      t.f32()[b * T * 2 + i] = static_cast<float>(x.values[c.rows[b] * 40 * 2 + i]);
    }
    if (c.give_lengths) batch.lengths.push_back(static_cast<int32_t>(len.values[c.rows[b]]));
  }
  batch.inputs.push_back(std::move(t));
  return batch;
}

::testing::AssertionResult MatchesKeras(const std::vector<engine::Tensor>& out, const Case& c) {
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");  // [3, 3]
  if (out.size() != 1 || out[0].shape() != engine::Shape{static_cast<int64_t>(c.rows.size()), 3}) {
    return ::testing::AssertionFailure() << "unexpected outputs";
  }
  for (size_t b = 0; b < c.rows.size(); ++b) {
    for (int k = 0; k < 3; ++k) {
      const double w = want.values[c.rows[b] * 3 + k];
      if (std::fabs(out[0].f32()[b * 3 + k] - w) > 1e-6 + 1e-5 * std::fabs(w)) {
        return ::testing::AssertionFailure()
               << "row " << b << " (fixture row " << c.rows[b] << ") class " << k << ": "
               << out[0].f32()[b * 3 + k] << ", Keras " << w;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(BatchingServableTest, ConcurrentCallersOfMixedLengthsEachGetKerasNumbersForTheirRows) {
  auto servable = LoadExample(kBatchingConfig);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ASSERT_NE((*servable)->batcher(), nullptr);
  const std::vector<Case> cases = {
      {{0}},
      {{1}},
      {{2}},
      {{2, 0}},
      {{1, 2}, true},
      {{0, 1, 2}},
      {{2, 1, 0}, true},
      {{2, 2}},
      {{0, 0, 1, 1, 2, 2, 0, 1, 2, 0}},  // more than max_batch_size: split and joined
  };
  constexpr int kCallers = 24;
  std::vector<std::vector<engine::Tensor>> outputs(kCallers);
  std::vector<absl::Status> status(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back(
        [&, i] { status[i] = (*servable)->Run(CaseBatch(cases[i % cases.size()]), &outputs[i]); });
  }
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_TRUE(status[i].ok()) << "caller " << i << ": " << status[i];
    EXPECT_TRUE(MatchesKeras(outputs[i], cases[i % cases.size()])) << "caller " << i;
  }
  (*servable)->batcher()->Drain();  // counters are final once nothing runs
  const auto counters = (*servable)->batcher()->counters();
  EXPECT_EQ(counters.requests_completed, kCallers);
  EXPECT_LE(counters.computed_steps * 10, counters.real_steps * 11);
}

// Steps [begin, end) of fixture row `row`, as a [1, end - begin, 2] batch.
engine::Batch Chunk(int row, int64_t begin, int64_t end) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");  // [3, 40, 2]
  engine::Tensor t = engine::Tensor::Float({1, end - begin, 2});
  for (int64_t i = 0; i < (end - begin) * 2; ++i) {
    t.f32()[i] = static_cast<float>(x.values[row * 80 + begin * 2 + i]);
  }
  engine::Batch batch;
  batch.inputs.push_back(std::move(t));
  return batch;
}

TEST(BatchingServableTest, ChunksOfConcurrentSequencesCarryStateThroughTheBatcher) {
  auto servable = LoadExample(kBatchingConfig);
  ASSERT_TRUE(servable.ok()) << servable.status();
  // Rows 0 (40 steps) and 1 (25 steps) in two chunks each, from two threads at once.
  const std::vector<std::pair<int, int64_t>> sequences = {{0, 40}, {1, 25}};
  std::vector<std::vector<engine::Tensor>> last(sequences.size());
  std::vector<absl::Status> status(sequences.size());
  std::vector<std::thread> callers;
  for (size_t i = 0; i < sequences.size(); ++i) {
    callers.emplace_back([&, i] {
      const auto [row, length] = sequences[i];
      std::map<std::string, std::vector<engine::Tensor>> states;
      engine::Batch first = Chunk(row, 0, 20);
      first.final_states = &states;
      std::vector<engine::Tensor> out;
      status[i] = (*servable)->Run(first, &out);
      if (!status[i].ok()) return;
      engine::Batch second = Chunk(row, 20, length);
      second.initial_states = states;
      status[i] = (*servable)->Run(second, &last[i]);
    });
  }
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < sequences.size(); ++i) {
    ASSERT_TRUE(status[i].ok()) << status[i];
    EXPECT_TRUE(MatchesKeras(last[i], {{sequences[i].first}})) << "sequence " << i;
  }
}

TEST(BatchingServableTest, PriorityOutsideTheLevelsIsInvalidArgument) {
  auto servable = LoadExample(kBatchingConfig);
  ASSERT_TRUE(servable.ok()) << servable.status();
  std::vector<engine::Tensor> out;
  const absl::Status s = (*servable)->Run(CaseBatch({{0}}), &out, RunOptions{.priority = 2});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("priority must be 0"), std::string::npos) << s;
}

TEST(BatchingServableTest, DynamicBatchingWithoutMaxBatchSizeRunsEachRequestAlone) {
  auto servable = LoadExample(R"pb(
    name: "waveform_lstm"
    max_batch_size: 0
    dynamic_batching {}
  )pb");
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->batcher(), nullptr);
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*servable)->Run(CaseBatch({{0, 1, 2}}), &out).ok());
  EXPECT_TRUE(MatchesKeras(out, {{0, 1, 2}}));
}

TEST(BatchingServableTest, WithoutDynamicBatchingThereIsNoBatcher) {
  auto servable = LoadExample(R"pb(name: "waveform_lstm" max_batch_size: 2)pb");
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->batcher(), nullptr);
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*servable)->Run(CaseBatch({{0, 1, 2}, true}), &out).ok());
  EXPECT_TRUE(MatchesKeras(out, {{0, 1, 2}}));
}

TEST(BatchingServableTest, BadBatchingSettingsFailTheLoadNamingTheField) {
  auto servable = LoadExample(R"pb(
    name: "waveform_lstm"
    max_batch_size: 8
    dynamic_batching { preferred_batch_size: 16 }
  )pb");
  ASSERT_FALSE(servable.ok());
  EXPECT_NE(servable.status().message().find("preferred_batch_size must be in [1, 8]"),
            std::string::npos)
      << servable.status();
  servable = LoadExample(R"pb(
    name: "waveform_lstm"
    max_batch_size: 8
    dynamic_batching {}
    parameters { key: "max_computed_steps_ratio" value: "lots" }
  )pb");
  ASSERT_FALSE(servable.ok());
  EXPECT_NE(servable.status().message().find("max_computed_steps_ratio must be a number"),
            std::string::npos)
      << servable.status();
}

}  // namespace
}  // namespace rnnserve::testing
