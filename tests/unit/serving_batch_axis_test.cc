// Batching joins requests along axis 0, so a model is batched only when axis 0 of its inputs
// and outputs holds independent sequences. PyTorch's default export (batch_first=False) puts
// time on axis 0: such a model with max_batch_size 8 in its config fails to load, the reason
// naming the fix (max_batch_size: 0); with max_batch_size 0 it runs each request alone and
// gives PyTorch's numbers.

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "server/servable.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;

// A repository entry <tmp>/<test>_<fixture>/1/model.onnx holding the fixture's model, one per
// test, so tests run in parallel do not write the same file.
std::string ModelDir(const std::string& fixture) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / (test + "_" + fixture);
  fs::create_directories(dir / "1");
  fs::copy_file(SourcePath("tests/fixtures/onnx/torch/" + fixture + "/model.onnx"),
                dir / "1" / "model.onnx", fs::copy_options::overwrite_existing);
  return dir.string();
}

constexpr char kBatched[] = R"pb(name: "m"
                                 platform: "onnx"
                                 max_batch_size: 8
                                 dynamic_batching { max_queue_delay_microseconds: 100 })pb";
constexpr char kUnbatched[] = R"pb(name: "m" platform: "onnx" max_batch_size: 0)pb";

absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& fixture, const char* text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
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

constexpr char kTimeMajor[] = "TorchLstmTimeMajorLinearOpset14";  // x [T=7, B=3, 4]

TEST(ServableBatchAxisTest, TimeMajorModelWithMaxBatchSizeFailsToLoadNamingTheFix) {
  auto servable = Load(kTimeMajor, kBatched);
  ASSERT_FALSE(servable.ok());
  EXPECT_EQ(servable.status().code(), absl::StatusCode::kFailedPrecondition);
  for (const char* part : {"model 'm' v1: max_batch_size 8", "output '",
                           "axis 0 is not the batch axis", "set max_batch_size: 0"}) {
    EXPECT_TRUE(absl::StrContains(servable.status().message(), part))
        << part << " in " << servable.status();
  }
}

TEST(ServableBatchAxisTest, TimeMajorModelWithMaxBatchSizeZeroRunsWithPyTorchNumbers) {
  auto servable = Load(kTimeMajor, kUnbatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->max_batch_size(), 0);
  EXPECT_EQ((*servable)->batcher(), nullptr);

  ExpectPyTorchNumbers(**servable, kTimeMajor);
}

TEST(ServableBatchAxisTest, BatchFirstModelKeepsDynamicBatching) {
  const std::string fixture = "TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17";
  auto servable = Load(fixture, kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_EQ((*servable)->max_batch_size(), 8);
  EXPECT_NE((*servable)->batcher(), nullptr);

  ExpectPyTorchNumbers(**servable, fixture);
}

}  // namespace
}  // namespace rnnserve::testing
