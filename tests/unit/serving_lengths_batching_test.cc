// How a PyTorch export that cannot honour per-sequence lengths (an op mixes time steps) is
// batched: only sequences of one length share a batch, by default; a padding bound that
// config.pbtxt sets otherwise fails the load, naming the parameter. A model that honours
// lengths keeps the usual bound.

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/servable.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;

constexpr char kRefuses[] = "CenteredOverTimeRefused";  // subtracts the mean over time
constexpr char kHonours[] = "LstmLastStepLinear";

absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& fixture,
                                               const std::string& parameter) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / (test + "_" + fixture);
  fs::create_directories(dir / "1");
  fs::copy_file(SourcePath("tests/fixtures/torch_lengths/" + fixture + "/model.onnx"),
                dir / "1" / "model.onnx", fs::copy_options::overwrite_existing);
  std::string text = R"pb(name: "m"
                          max_batch_size: 8
                          dynamic_batching {}
                          instance_group { kind: KIND_CPU count: 1 })pb";
  if (!parameter.empty()) {
    absl::StrAppend(&text, " parameters { key: \"max_computed_steps_ratio\" value: \"",
                    parameter, "\" }");
  }
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config)) << text;
  return Servable::Load(dir.string(), 1, config);
}

TEST(LengthsBatchingTest, AModelThatRefusesLengthsBatchesOnlyOneLengthByDefault) {
  auto servable = Load(kRefuses, "");
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_FALSE((*servable)->lengths().honored.ok());
  ASSERT_NE((*servable)->batcher(), nullptr);
  EXPECT_DOUBLE_EQ((*servable)->batcher()->options().max_computed_steps_ratio, 1.0);
}

TEST(LengthsBatchingTest, AnotherPaddingBoundForAModelThatRefusesLengthsFailsTheLoad) {
  auto servable = Load(kRefuses, "2");
  ASSERT_FALSE(servable.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(servable.status())) << servable.status();
  EXPECT_TRUE(absl::StrContains(servable.status().message(), "max_computed_steps_ratio is 2"))
      << servable.status();
  EXPECT_TRUE(Load(kRefuses, "1").ok());
}

TEST(LengthsBatchingTest, AModelThatHonoursLengthsKeepsTheConfiguredBound) {
  auto servable = Load(kHonours, "2");
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_TRUE((*servable)->lengths().honored.ok());
  EXPECT_DOUBLE_EQ((*servable)->batcher()->options().max_computed_steps_ratio, 2.0);
}

}  // namespace
}  // namespace rnnserve::testing
