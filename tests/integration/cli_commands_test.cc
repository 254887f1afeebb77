// rnnserve-cli's and `rnnserve inspect`'s output against the real server binary: stream's
// --output file, metadata --json's scheduling fields, and inspect's output shapes, checked
// against the Keras and onnxruntime outputs of the fixtures.

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using Json = nlohmann::json;

std::string TempPath(const std::string& stem) {
  return (std::filesystem::temp_directory_path() / (stem + "_" + std::to_string(getpid()) + ".npz"))
      .string();
}

client::NpyArray Fixture(const std::string& relative) {
  auto a = client::ReadNpy(SourcePath(relative));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : client::NpyArray{};
}

// The lengths the example's fixtures were made with (tests/fixtures/example/lengths.npy).
std::string ExampleLengths() {
  const client::NpyArray lengths = Fixture("tests/fixtures/example/lengths.npy");
  std::string out;
  for (double v : lengths.values) {
    if (!out.empty()) out += ",";
    out += std::to_string(static_cast<int64_t>(v));
  }
  return out;
}

class CliCommandsTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() { StartServer(SourcePath("models/examples")); }
};

TEST_F(CliCommandsTest, StreamOutputWritesEachSequencesFinalAnswerAsKeras) {
  const std::string out = TempPath("rnnserve_cli_stream");
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "stream", "--server", server()->address(), "--model",
                        "waveform_lstm", "--input", SourcePath("tests/fixtures/example/input.npy"),
                        "--lengths", ExampleLengths(), "--chunk-steps", "7", "--output", out},
                       &log),
            0)
      << log;
  EXPECT_NE(log.find("wrote " + out), std::string::npos) << log;
  auto arrays = client::ReadNpz(out);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  ASSERT_EQ(arrays->count("probabilities"), 1u);
  const client::NpyArray& got = arrays->at("probabilities");
  const client::NpyArray want = Fixture("tests/fixtures/example/expected.npy");
  ASSERT_EQ(got.shape, want.shape);  // one row per sequence, as predict's
  for (size_t k = 0; k < want.values.size(); ++k) {
    EXPECT_NEAR(got.values[k], want.values[k], 1e-5 + 1e-5 * std::abs(want.values[k])) << k;
  }
  std::remove(out.c_str());
}

TEST_F(CliCommandsTest, MetadataShowsStreamableAndSchedulerAsTheServerSays) {
  client::RnnServeClient rpc({.server = server()->address()});
  auto meta = rpc.Metadata("waveform_lstm", 0);
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_FALSE(meta->scheduler().empty());

  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "metadata", "--server", server()->address(), "--model",
                        "waveform_lstm", "--json"},
                       &log),
            0)
      << log;
  const Json j = Json::parse(log);
  EXPECT_EQ(j.at("streamable").get<bool>(), meta->streamable());
  EXPECT_TRUE(j.at("streamable").get<bool>()) << "a forward LSTM with a Dense head streams";
  EXPECT_EQ(j.at("streamable_reason").get<std::string>(), meta->streamable_reason());
  EXPECT_EQ(j.at("scheduler").get<std::string>(), meta->scheduler());
  EXPECT_EQ(j.at("scheduler_reason").get<std::string>(), meta->scheduler_reason());
  // Why each instance runs on its engine (on a host without a GPU: that there is none).
  ASSERT_EQ(j.at("instances").size(), static_cast<size_t>(meta->instances_size()));
  ASSERT_FALSE(meta->instances(0).reason().empty());
  EXPECT_EQ(j.at("instances")[0].at("reason").get<std::string>(), meta->instances(0).reason());

  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "metadata", "--server", server()->address(), "--model",
                        "waveform_lstm"},
                       &log),
            0)
      << log;
  EXPECT_NE(log.find("scheduler " + meta->scheduler()), std::string::npos) << log;
  EXPECT_NE(log.find("streaming yes"), std::string::npos) << log;
  EXPECT_NE(log.find(meta->instances(0).reason()), std::string::npos) << log;
}

// `rnnserve inspect --json`'s output shapes: batch and time axes dynamic (-1), the others as
// the framework's output (Keras's expected.npy, onnxruntime's out_0) has them.
Json InspectOutputs(const std::string& model_file) {
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "inspect", SourcePath(model_file), "--json"}, &log), 0)
      << log;
  return Json::parse(log).at("outputs");
}

TEST(InspectOutputs, ShowsTheKerasExamplesOutputShape) {
  const Json outs = InspectOutputs("models/examples/waveform_lstm/1/model.h5");
  ASSERT_EQ(outs.size(), 1u) << outs;
  const client::NpyArray want = Fixture("tests/fixtures/example/expected.npy");  // [B, 3]
  EXPECT_EQ(outs[0].at("shape").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{-1, want.shape[1]}))
      << outs;
  EXPECT_EQ(outs[0].at("dtype"), "FP32") << outs;

  std::string log;
  ASSERT_EQ(
      RunCommand({RNNSERVE_BIN, "inspect", SourcePath("models/examples/waveform_lstm/1/model.h5")},
                 &log),
      0)
      << log;
  EXPECT_NE(
      log.find("output probabilities        FP32   [?," + std::to_string(want.shape[1]) + "]\n"),
      std::string::npos)
      << log;
}

// A SavedModel directory as TF Serving lays it out: its format, the serving signature's names
// (the fixture's signature.json, from TensorFlow) and Keras's output shapes.
TEST(InspectOutputs, ShowsASavedModelDirectorysSignatureNames) {
  const std::string dir = "tests/fixtures/savedmodel/SavedModelFunctionalReturnStateDefaultSave";
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_BIN, "inspect", SourcePath(dir + "/model/1"), "--json"}, &log), 0)
      << log;
  const Json j = Json::parse(log);
  EXPECT_EQ(j.at("format"), "tf_savedmodel") << j;
  std::ifstream in(SourcePath(dir + "/signature.json"));
  const Json sig = Json::parse(in);
  std::set<std::string> inputs, outputs;
  for (const Json& i : j.at("inputs")) inputs.insert(i.at("name").get<std::string>());
  for (const Json& o : j.at("outputs")) outputs.insert(o.at("name").get<std::string>());
  EXPECT_EQ(inputs, sig.at("inputs").get<std::set<std::string>>()) << j;
  EXPECT_EQ(outputs, sig.at("outputs").get<std::set<std::string>>()) << j;
  // Keras's [B, T, H]; the input's T is fixed in this model (Input((4, 2))).
  const client::NpyArray seq = Fixture(dir + "/expected_0.npy");
  EXPECT_EQ(j.at("outputs")[0].at("shape").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{-1, seq.shape[1], seq.shape[2]}))
      << j;
}

// A SavedModel without Keras metadata (Keras 3 model.export), recognised from its graph: the
// signature's names (TensorFlow's signature.json) and Keras's output shape.
TEST(InspectOutputs, ShowsAGraphOnlySavedModelsSignatureNames) {
  const std::string dir = "tests/fixtures/savedmodel/Keras3ExportBidirectionalLstmDense";
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_BIN, "inspect", SourcePath(dir + "/model/1"), "--json"}, &log), 0)
      << log;
  const Json j = Json::parse(log);
  EXPECT_EQ(j.at("format"), "tf_savedmodel") << j;
  std::ifstream in(SourcePath(dir + "/signature.json"));
  const Json sig = Json::parse(in);
  std::set<std::string> inputs, outputs;
  for (const Json& i : j.at("inputs")) inputs.insert(i.at("name").get<std::string>());
  for (const Json& o : j.at("outputs")) outputs.insert(o.at("name").get<std::string>());
  EXPECT_EQ(inputs, sig.at("inputs").get<std::set<std::string>>()) << j;
  EXPECT_EQ(outputs, sig.at("outputs").get<std::set<std::string>>()) << j;
  const client::NpyArray seq = Fixture(dir + "/expected_0.npy");  // Keras's [B, T, 2]
  EXPECT_EQ(j.at("outputs")[0].at("shape").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{-1, seq.shape[1], seq.shape[2]}))
      << j;
}

TEST(InspectOutputs, ShowsATorchExportsPerStepOutputShape) {
  const std::string dir =
      "tests/fixtures/onnx/torch/TorchLstmBatchFirstBidirectionalStackedSoftmaxOpset17";
  auto data = client::ReadNpz(SourcePath(dir + "/data.npz"));
  ASSERT_TRUE(data.ok()) << data.status();
  const std::vector<int64_t>& ort = data->at("out_0").shape;  // onnxruntime's [B, T, 5]
  ASSERT_EQ(ort.size(), 3u);
  const Json outs = InspectOutputs(dir + "/model.onnx");
  ASSERT_EQ(outs.size(), 1u) << outs;
  EXPECT_EQ(outs[0].at("shape").get<std::vector<int64_t>>(), (std::vector<int64_t>{-1, -1, ort[2]}))
      << outs;
}

}  // namespace
}  // namespace rnnserve::testing
