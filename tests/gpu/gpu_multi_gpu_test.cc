// A model whose instance_group names GPUs 0 and 1 gets one instance on each, and both serve
// Keras's numbers (the example model's fixture, made by models/scripts/make_example.py).
// Skips visibly with fewer than two GPUs.

#include <google/protobuf/text_format.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/model_config.h"
#include "server/servable.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

constexpr char kTwoGpuConfig[] = R"pb(
  name: "waveform_lstm"
  platform: "keras_h5"
  max_batch_size: 8
  instance_group {
    kind: KIND_GPU
    count: 1
    gpus: [ 0, 1 ]
  }
)pb";

v1::ModelConfig Config(const std::string& text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return config;
}

// Empty with two GPUs or more; otherwise why the test cannot run.
std::string FewerThanTwoGpus() {
  if (std::string why = NoGpuReason(); !why.empty()) return why;
  auto second = engine::Engine::Create({.kind = engine::EngineKind::kCuda, .device = 1});
  return second.ok() ? "" : std::string(second.status().message());
}

// The example fixture: x [3, 40, 2] with lengths, Keras's probabilities [3, 3].
engine::Batch FixtureBatch() {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray len = LoadNpy("tests/fixtures/example/lengths.npy");
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(x));
  for (double l : len.values) batch.lengths.push_back(static_cast<int32_t>(l));
  return batch;
}

TEST(GpuMultiGpuTest, OneInstancePerNamedGpuEachServesKerasNumbers) {
  if (const std::string why = FewerThanTwoGpus(); !why.empty()) {
    GTEST_SKIP() << "needs two GPUs: " << why;
  }
  auto servable =
      server::Servable::Load(SourcePath("models/examples/waveform_lstm"), 1, Config(kTwoGpuConfig));
  ASSERT_TRUE(servable.ok()) << servable.status();
  const auto& instances = (*servable)->instances();
  ASSERT_EQ(instances.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(instances[i].engine, "cuda");
    EXPECT_EQ(instances[i].kind, "KIND_GPU");
    EXPECT_TRUE(absl::StrContains(instances[i].reason, absl::StrCat("GPU ", i)))
        << instances[i].reason;
    // Algorithms were timed at load for batch sizes 1 and max_batch_size (8).
    bool timed = false;
    for (const auto& layer : instances[i].layers) {
      if (!absl::StrContains(layer.reason, "chosen by timing")) continue;
      timed = true;
      EXPECT_TRUE(absl::StrContains(layer.reason, "B=1 T<=")) << layer.reason;
      EXPECT_TRUE(absl::StrContains(layer.reason, "B=5..8 T<=")) << layer.reason;
    }
    EXPECT_TRUE(timed) << "no recurrent layer reports its timed algorithms";
  }
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  for (int i = 0; i < 2; ++i) {
    std::vector<engine::Tensor> out;
    const absl::Status s = (*servable)->RunOn(i, FixtureBatch(), &out);
    ASSERT_TRUE(s.ok()) << "instance " << i << ": " << s;
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(AllClose(out[0], want, kFp32Exact)) << "instance " << i;
  }
}

TEST(GpuMultiGpuTest, GpusForKindCpuIsRejected) {
  const absl::Status s = server::ValidateModelConfig(Config(R"pb(name: "m"
                                                                 instance_group {
                                                                   kind: KIND_CPU
                                                                   gpus: [ 0 ]
                                                                 })pb"),
                                                     "config.pbtxt");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace rnnserve::testing
