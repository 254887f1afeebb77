// PyTorch exports with h0 / c0 inputs ([num_layers * num_directions, batch, hidden], batch on
// axis 1) served by a Servable, with PyTorch's numbers (tests/fixtures/torch_state/,
// models/scripts/make_torch_state_fixtures.py): docs/import-onnx.md's recipe loads with and
// without max_batch_size 0 and answers at batch sizes 1, 2 and 4; the signature keeps the
// file's layout and says where the batch is; the dynamic batcher joins and splits requests'
// states on their batch axis; a request whose states disagree with x on the batch is refused
// naming the input.

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "server/core/request.h"
#include "server/servable.h"
#include "server/tensor_codec.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;

constexpr char kDocs[] = "TorchLstmDocsRecipeH0C0";  // x [B, T, 6], h0 / c0 [1, B, 32]

std::string ModelDir(const std::string& fixture) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const fs::path dir = fs::path(::testing::TempDir()) / (test + "_" + fixture);
  fs::create_directories(dir / "1");
  fs::copy_file(SourcePath("tests/fixtures/torch_state/" + fixture + "/model.onnx"),
                dir / "1" / "model.onnx", fs::copy_options::overwrite_existing);
  return dir.string();
}

absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& fixture,
                                               const std::string& text) {
  v1::ModelConfig config;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &config));
  return Servable::Load(ModelDir(fixture), 1, config);
}

std::map<std::string, client::NpyArray> Data(const std::string& fixture) {
  auto npz = client::ReadNpz(SourcePath("tests/fixtures/torch_state/" + fixture + "/data.npz"));
  EXPECT_TRUE(npz.ok()) << npz.status();
  return npz.ok() ? *npz : std::map<std::string, client::NpyArray>{};
}

std::string Key(const char* kind, size_t k, int b) {
  return std::string(kind) + "_" + std::to_string(k) + "_b" + std::to_string(b);
}

engine::Batch Inputs(const Servable& s, const std::map<std::string, client::NpyArray>& data,
                     int b) {
  engine::Batch batch;
  for (size_t k = 0; k < s.inputs().size(); ++k) {
    batch.inputs.push_back(ToFloatTensor(data.at(Key("in", k, b))));
  }
  return batch;
}

void ExpectPyTorch(const Servable& s, const std::map<std::string, client::NpyArray>& data, int b,
                   const std::vector<engine::Tensor>& out) {
  ASSERT_EQ(out.size(), s.outputs().size());
  for (size_t k = 0; k < out.size(); ++k) {
    EXPECT_TRUE(AllClose(out[k], data.at(Key("out", k, b)))) << s.outputs()[k].name << " B=" << b;
  }
}

// Each request alone, at B = 1, 2, 4.
void ExpectPyTorchAtEveryBatchSize(const Servable& s, const std::string& fixture) {
  const auto data = Data(fixture);
  for (int b : {1, 2, 4}) {
    std::vector<engine::Tensor> out;
    const absl::Status run = s.Run(Inputs(s, data, b), &out);
    ASSERT_TRUE(run.ok()) << "B=" << b << ": " << run;
    ExpectPyTorch(s, data, b, out);
  }
}

constexpr char kUnbatched[] = R"pb(name: "m" platform: "onnx" max_batch_size: 0)pb";
constexpr char kBatched[] = R"pb(name: "m"
                                 platform: "onnx"
                                 max_batch_size: 8
                                 dynamic_batching { max_queue_delay_microseconds: 100 })pb";
constexpr char kNoConfig[] = R"pb(name: "m")pb";

TEST(ServableTorchStateTest, DocsRecipeLoadsAndMatchesPyTorchWithMaxBatchSizeZero) {
  auto servable = Load(kDocs, kUnbatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ExpectPyTorchAtEveryBatchSize(**servable, kDocs);
}

TEST(ServableTorchStateTest, DocsRecipeLoadsAndMatchesPyTorchWithDynamicBatching) {
  auto servable = Load(kDocs, kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  EXPECT_NE((*servable)->batcher(), nullptr);
  ExpectPyTorchAtEveryBatchSize(**servable, kDocs);
}

TEST(ServableTorchStateTest, DocsRecipeLoadsWithoutConfig) {
  auto servable = Load(kDocs, kNoConfig);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ExpectPyTorchAtEveryBatchSize(**servable, kDocs);
}

TEST(ServableTorchStateTest, SignatureKeepsTheFilesLayoutWithTheBatchAxis) {
  auto servable = Load(kDocs, kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  const auto& in = (*servable)->inputs();
  ASSERT_EQ(in.size(), 3u);
  EXPECT_EQ(in[0].batch_axis, 0);
  EXPECT_EQ(in[0].shape, (engine::Shape{-1, -1, 6}));
  for (int k : {1, 2}) {
    EXPECT_EQ(in[k].batch_axis, 1) << in[k].name;
    EXPECT_EQ(in[k].shape, (engine::Shape{1, -1, 32})) << in[k].name;
  }
  const auto& out = (*servable)->outputs();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].batch_axis, 0);
  for (int k : {1, 2}) {
    EXPECT_EQ(out[k].batch_axis, 1) << out[k].name;
    EXPECT_EQ(out[k].shape, (engine::Shape{1, -1, 32})) << out[k].name;
  }
}

// Requests of 1, 2 and 4 rows queued together share batches of at most 2 rows: their states
// are joined and split on axis 1, and each gets its own rows back.
TEST(ServableTorchStateTest, BatcherJoinsAndSplitsStatesOnTheirBatchAxis) {
  const std::string fixture = "TorchLstmBatchFirstStackedBidirectionalH0C0";  // h0 [4, B, 8]
  auto servable = Load(fixture, R"pb(name: "m"
                                     platform: "onnx"
                                     max_batch_size: 2
                                     dynamic_batching {})pb");
  ASSERT_TRUE(servable.ok()) << servable.status();
  const Servable& s = **servable;
  const auto data = Data(fixture);
  using Result = absl::StatusOr<std::vector<engine::Tensor>>;
  std::vector<std::promise<Result>> promises(3);
  std::vector<std::future<Result>> answers;
  const int sizes[] = {1, 2, 4};
  for (int i = 0; i < 3; ++i) {
    answers.push_back(promises[i].get_future());
    s.RunAsync(Inputs(s, data, sizes[i]), {},
               [&promises, i](Result r) { promises[i].set_value(std::move(r)); });
  }
  for (int i = 0; i < 3; ++i) {
    Result r = answers[i].get();
    ASSERT_TRUE(r.ok()) << "B=" << sizes[i] << ": " << r.status();
    ExpectPyTorch(s, data, sizes[i], *r);
  }
}

TEST(ServableTorchStateTest, TimeMajorStatesMatchPyTorchWithMaxBatchSizeZero) {
  for (const char* fixture :
       {"TorchLstmTimeMajorStackedBidirectionalH0C0", "TorchGruTimeMajorBidirectionalH0"}) {
    auto servable = Load(fixture, kUnbatched);
    ASSERT_TRUE(servable.ok()) << fixture << ": " << servable.status();
    EXPECT_EQ((*servable)->inputs()[0].batch_axis, 1) << fixture;
    ExpectPyTorchAtEveryBatchSize(**servable, fixture);
  }
}

TEST(ServableTorchStateTest, StackedGruStatesMatchPyTorchWithDynamicBatching) {
  auto servable = Load("TorchGruBatchFirstStackedH0", kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  ExpectPyTorchAtEveryBatchSize(**servable, "TorchGruBatchFirstStackedH0");
}

TEST(ServableTorchStateTest, StateBatchThatDiffersFromTheInputsIsRefusedNamingIt) {
  auto servable = Load(kDocs, kBatched);
  ASSERT_TRUE(servable.ok()) << servable.status();
  const auto data = Data(kDocs);
  v1::PredictRequest request;
  server::EncodeTensor(ToFloatTensor(data.at("in_0_b2")), &(*request.mutable_inputs())["x"]);
  server::EncodeTensor(ToFloatTensor(data.at("in_1_b4")), &(*request.mutable_inputs())["h0"]);
  server::EncodeTensor(ToFloatTensor(data.at("in_2_b2")), &(*request.mutable_inputs())["c0"]);
  auto batch = server::core::Validate(server::DecodePredict(request), (*servable)->signature());
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* part : {"input 'h0'", "batch size 4 (axis 1)", "other inputs' 2"}) {
    EXPECT_TRUE(absl::StrContains(batch.status().message(), part))
        << part << " in " << batch.status();
  }
  // Rows taken from h0 [1, 2, 32] as given: valid.
  server::EncodeTensor(ToFloatTensor(data.at("in_1_b2")), &(*request.mutable_inputs())["h0"]);
  EXPECT_TRUE(server::core::Validate(server::DecodePredict(request), (*servable)->signature()).ok());
}

// The exporter's zero-state chain is dropped, so a causal export streams; a model that takes
// h0 / c0 as inputs does not (they would replace the state the stream carries).
TEST(ServableTorchStateTest, CausalExportStreamsAndOneWithStateInputsSaysWhyNot) {
  for (const char* fixture : {"TorchLstmCausalLinearZeroState",
                              "TorchLstmStackedCausalLinearZeroState",
                              "TorchGruCausalLinearZeroState"}) {
    auto servable = Load(fixture, kNoConfig);
    ASSERT_TRUE(servable.ok()) << fixture << ": " << servable.status();
    EXPECT_TRUE((*servable)->streamable().ok()) << fixture << ": " << (*servable)->streamable();
  }
  auto states = Load(kDocs, kNoConfig);
  ASSERT_TRUE(states.ok()) << states.status();
  EXPECT_EQ((*states)->streamable().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains((*states)->streamable().message(), "input 'h0'"))
      << (*states)->streamable();
}

}  // namespace
}  // namespace rnnserve::testing
