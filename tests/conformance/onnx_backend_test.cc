// ONNX's own backend node tests for the recurrent ops (Debian package libonnx-testdata:
// model.onnx + test_data_set_0/{input,output}_N.pb), run on the CPU engine.
//
// The test models feed W, R, B and P as graph inputs; rnnserve takes weights from initializers
// (what exported files hold), so each test moves those inputs, with the test's own values, into
// the graph's initializers before loading. X, sequence_lens and the initial states stay inputs.

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/onnx/onnx.pb.h"
#include "models/onnx/onnx_model.h"
#include "models/onnx/onnx_tensor.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

namespace fs = std::filesystem;
namespace onnx = models::onnx;

constexpr char kNodeTests[] = "/usr/share/libonnx-testdata/data/node";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

onnx::TensorProto ReadTensorProto(const fs::path& path) {
  onnx::TensorProto t;
  EXPECT_TRUE(t.ParseFromString(ReadFile(path))) << path;
  return t;
}

client::NpyArray ToNpy(const engine::Tensor& t) {
  client::NpyArray a{"<f4", t.shape(), {}};
  a.values.assign(t.floats().begin(), t.floats().end());
  return a;
}

class OnnxBackendNodeTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxBackendNodeTest, MatchesOnnxExpectedOutputs) {
  const fs::path dir = fs::path(kNodeTests) / GetParam();
  if (!fs::is_directory(dir)) {
    GTEST_SKIP() << dir << " is absent; install the Debian package libonnx-testdata";
  }
  onnx::ModelProto proto;
  ASSERT_TRUE(proto.ParseFromString(ReadFile(dir / "model.onnx")));
  onnx::GraphProto* graph = proto.mutable_graph();

  // Weight inputs of recurrent nodes: W, R, B and P.
  std::set<std::string> weights;
  for (const onnx::NodeProto& node : graph->node()) {
    for (int i : {1, 2, 3, 7}) {
      if (i < node.input_size() && !node.input(i).empty()) weights.insert(node.input(i));
    }
  }
  const fs::path data = dir / "test_data_set_0";
  std::vector<engine::Tensor> runtime_inputs;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (int i = 0; i < graph->input_size(); ++i) {
    onnx::TensorProto value = ReadTensorProto(data / ("input_" + std::to_string(i) + ".pb"));
    const std::string& name = graph->input(i).name();
    if (weights.count(name)) {
      value.set_name(name);
      *graph->add_initializer() = value;
      continue;
    }
    *kept.Add() = graph->input(i);
    auto t = onnx::TensorFromProto(value, name);
    ASSERT_TRUE(t.ok()) << t.status();
    runtime_inputs.push_back(*t);
  }
  graph->mutable_input()->Swap(&kept);

  auto model = onnx::LoadOnnxBytes(proto.SerializeAsString(), (dir / "model.onnx").string());
  ASSERT_TRUE(model.ok()) << model.status();
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  auto compiled = (*engine)->Compile(*model, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  engine::Batch batch;
  batch.inputs = runtime_inputs;
  std::vector<engine::Tensor> out;
  ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
  ASSERT_EQ(out.size(), static_cast<size_t>(graph->output_size()));
  for (size_t k = 0; k < out.size(); ++k) {
    auto want = onnx::TensorFromProto(
        ReadTensorProto(data / ("output_" + std::to_string(k) + ".pb")), "expected output");
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_TRUE(testing::AllClose(out[k], ToNpy(*want), 1e-5, 1e-6))
        << "output " << graph->output(k).name();
  }
}

INSTANTIATE_TEST_SUITE_P(
    RecurrentOps, OnnxBackendNodeTest,
    ::testing::Values("test_lstm_defaults", "test_lstm_with_initial_bias",
                      "test_lstm_with_peepholes", "test_lstm_batchwise", "test_gru_defaults",
                      "test_gru_with_initial_bias", "test_gru_seq_length", "test_gru_batchwise",
                      "test_rnn_seq_length", "test_simple_rnn_defaults",
                      "test_simple_rnn_with_initial_bias", "test_simple_rnn_batchwise"),
    [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(OnnxBackendNodeTestData, EveryRecurrentNodeTestIsCovered) {
  if (!fs::is_directory(kNodeTests)) {
    GTEST_SKIP() << kNodeTests << " is absent; install the Debian package libonnx-testdata";
  }
  const std::set<std::string> covered = {"test_lstm_defaults",
                                         "test_lstm_with_initial_bias",
                                         "test_lstm_with_peepholes",
                                         "test_lstm_batchwise",
                                         "test_gru_defaults",
                                         "test_gru_with_initial_bias",
                                         "test_gru_seq_length",
                                         "test_gru_batchwise",
                                         "test_rnn_seq_length",
                                         "test_simple_rnn_defaults",
                                         "test_simple_rnn_with_initial_bias",
                                         "test_simple_rnn_batchwise"};
  for (const auto& entry : fs::directory_iterator(kNodeTests)) {
    const std::string name = entry.path().filename().string();
    for (const char* prefix : {"test_lstm", "test_gru", "test_rnn", "test_simple_rnn"}) {
      if (name.rfind(prefix, 0) == 0) {
        EXPECT_TRUE(covered.count(name)) << name;
      }
    }
  }
}

}  // namespace
}  // namespace rnnserve
