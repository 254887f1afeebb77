// config.pbtxt as Triton users write it (server/model_config_triton.h): `backend:` accepted and
// ignored with a log line, Triton-only fields warned about once and ignored, a name that
// differs from its directory warned about, and a field nobody defines still an error; TF
// Serving's version_labels.

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/model_config.h"
#include "server/model_config_triton.h"

namespace rnnserve::server {
namespace {

namespace fs = std::filesystem;
using ::testing::internal::CaptureStderr;
using ::testing::internal::GetCapturedStderr;

// A config.pbtxt as Triton's docs write one for a TensorFlow SavedModel.
constexpr char kTritonConfig[] = R"pb(
  name: "lstm"
  backend: "tensorflow"
  platform: "tensorflow_savedmodel"
  max_batch_size: 8 input
  [ {
    name: "lstm_input"
    data_type: TYPE_FP32
    format: FORMAT_NONE
    dims: [ -1, 3 ]
  }] output
  [ {
    name: "dense"
    data_type: TYPE_FP32
    dims: [ 2 ]
    label_filename: "labels.txt"
  }] instance_group
  [ {
    kind: KIND_CPU
    count: 1
    profile: [ "0" ]
  }]
  dynamic_batching { max_queue_delay_microseconds: 100 preserve_ordering: true } model_warmup
  [ {
    name: "zeros"
    batch_size: 1
    inputs {
      key: "lstm_input"
      value: {
        data_type: TYPE_FP32
        dims: [ 5, 3 ]
        zero_data: true
      }
    }
  }]
  response_cache { enable: true }
)pb";

TEST(ModelConfigTriton, BackendIsAcceptedAndLoggedAsIgnored) {
  CaptureStderr();
  auto config = ParseModelConfig("backend: \"onnxruntime\"\nmax_batch_size: 4", "a/config.pbtxt");
  const std::string log = GetCapturedStderr();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_batch_size(), 4);
  EXPECT_TRUE(absl::StrContains(log, "a/config.pbtxt: line 1: backend ignored")) << log;
}

TEST(ModelConfigTriton, TritonConfigParsesWithEachUnusedFieldWarnedOnce) {
  CaptureStderr();
  auto config = ParseModelConfig(kTritonConfig, "b/config.pbtxt");
  const std::string first = GetCapturedStderr();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->platform(), "tensorflow_savedmodel");
  EXPECT_EQ(config->max_batch_size(), 8);
  ASSERT_EQ(config->input_size(), 1);
  EXPECT_EQ(config->input(0).dims_size(), 2);
  EXPECT_EQ(config->dynamic_batching().max_queue_delay_microseconds(), 100u);
  for (const char* field : {"'format'", "'label_filename'", "'profile'", "'preserve_ordering'",
                            "'model_warmup'", "'response_cache'"}) {
    EXPECT_TRUE(absl::StrContains(first, std::string("Triton's ") + field + " is not used"))
        << field << "\n"
        << first;
  }
  CaptureStderr();
  ASSERT_TRUE(ParseModelConfig(kTritonConfig, "b/config.pbtxt").ok());
  const std::string second = GetCapturedStderr();
  EXPECT_FALSE(absl::StrContains(second, "is not used")) << second;
  EXPECT_FALSE(absl::StrContains(second, "backend ignored")) << second;
}

TEST(ModelConfigTriton, ColonIsPutBeforeTritonListsOnlyOutsideStringsAndComments) {
  EXPECT_EQ(ColonBeforeTritonLists("model_warmup [ { name: \"w\" } ]"),
            "model_warmup: [ { name: \"w\" } ]");
  EXPECT_EQ(ColonBeforeTritonLists("batch_input\n  [ ]"), "batch_input:\n  [ ]");
  // Fields we define keep their colon-less lists; strings and comments are left alone.
  EXPECT_EQ(ColonBeforeTritonLists("input [ { name: \"model_warmup [\" } ]"),
            "input [ { name: \"model_warmup [\" } ]");
  EXPECT_EQ(ColonBeforeTritonLists("# model_warmup [\nname: 'a\\'model_warmup ['"),
            "# model_warmup [\nname: 'a\\'model_warmup ['");
  EXPECT_EQ(ColonBeforeTritonLists("my_model_warmup [ 1 ]"), "my_model_warmup [ 1 ]");
}

TEST(ModelConfigTriton, AFieldNobodyDefinesIsStillAnError) {
  auto config = ParseModelConfig("max_batch_size: 4\nmax_bach_size: 8", "c/config.pbtxt");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(config.status().message(), "line 2")) << config.status();
  EXPECT_TRUE(absl::StrContains(config.status().message(), "max_bach_size")) << config.status();
}

TEST(ModelConfigVersionLabels, TfServingsSyntaxParsesAndBadLabelsAreRefused) {
  auto config = ParseModelConfig(
      "version_labels { key: \"stable\" value: 1 }\nversion_labels { key: \"canary\" value: 2 }",
      "c/config.pbtxt");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->version_labels().at("stable"), 1);
  EXPECT_EQ(config->version_labels().at("canary"), 2);
  EXPECT_TRUE(ValidateModelConfig(*config, "c/config.pbtxt").ok());
  for (const char* bad :
       {"version_labels { key: \"\" value: 1 }", "version_labels { key: \"old\" value: 0 }"}) {
    const absl::Status s = ParseModelConfig(bad, "c/config.pbtxt").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), "version_labels")) << s;
  }
}

TEST(ModelConfigTriton, NameThatDiffersFromItsDirectoryIsAWarning) {
  const fs::path dir = fs::path(::testing::TempDir()) / "served_name";
  fs::create_directories(dir);
  std::ofstream(dir / "config.pbtxt") << "name: \"other_name\"\nmax_batch_size: 2\n";
  CaptureStderr();
  auto config = ReadModelConfig(dir.string());
  const std::string log = GetCapturedStderr();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(absl::StrContains(log, "name 'other_name' differs from its directory 'served_name'"))
      << log;

  std::ofstream(dir / "config.pbtxt") << "name: \"served_name\"\n";
  CaptureStderr();
  ASSERT_TRUE(ReadModelConfig(dir.string()).ok());
  EXPECT_FALSE(absl::StrContains(GetCapturedStderr(), "differs"));
}

}  // namespace
}  // namespace rnnserve::server
