// Batching joins requests along axis 0, so a model is batched only when axis 0 of its inputs
// and outputs holds independent sequences. PyTorch's default export (batch_first=False) puts
// time on axis 0: such a model loads with max_batch_size 8 in its config, runs each request
// alone, and still gives PyTorch's numbers.

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "client/npy.h"
#include "gtest/gtest.h"
#include "server/servable.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;

// A repository entry <tmp>/<name>/1/model.onnx holding the fixture's model.
std::string ModelDir(const std::string& fixture) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("batch_axis_" + fixture);
  fs::create_directories(dir / "1");
  fs::copy_file(SourcePath("tests/fixtures/onnx/torch/" + fixture + "/model.onnx"),
                dir / "1" / "model.onnx", fs::copy_options::overwrite_existing);
  return dir.string();
}

absl::StatusOr<std::unique_ptr<Servable>> LoadBatched(const std::string& fixture) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(name: "m"
           platform: "onnx"
           max_batch_size: 8
           dynamic_batching { max_queue_delay_microseconds: 100 })pb",
      &config));
  return Servable::Load(ModelDir(fixture), 1, config);
}

client::NpyArray FixtureArray(const std::string& fixture, const std::string& key) {
  auto npz = client::ReadNpz(SourcePath("tests/fixtures/onnx/torch/" + fixture + "/data.npz"));
  EXPECT_TRUE(npz.ok()) << npz.status();
  return npz.ok() ? (*npz)[key] : client::NpyArray{};
}

// The fixture's whole input as one request gives the fixture's output.
void ExpectPyTorchNumbers(const Servable& servable, const std::string& fixture) {
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(FixtureArray(fixture, "in_0")));
  std::vector<engine::Tensor> out;
  ASSERT_TRUE(servable.Run(batch, &out, {}).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], FixtureArray(fixture, "out_0")));
}

TEST(ServableBatchAxisTest, TimeMajorModelRunsRequestsAloneWithPyTorchNumbers) {
  const std::string fixture = "TorchLstmTimeMajorLinearOpset14";  // x [T=7, B=3, 4]
  auto servable = LoadBatched(fixture);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->max_batch_size(), 0);
  EXPECT_EQ((*servable)->config().max_batch_size(), 0);
  EXPECT_EQ((*servable)->batcher(), nullptr);

  ExpectPyTorchNumbers(**servable, fixture);
}

TEST(ServableBatchAxisTest, BatchFirstModelKeepsDynamicBatching) {
  const std::string fixture = "TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17";
  auto servable = LoadBatched(fixture);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->max_batch_size(), 8);
  EXPECT_NE((*servable)->batcher(), nullptr);

  ExpectPyTorchNumbers(**servable, fixture);
}

}  // namespace
}  // namespace rnnserve::testing
