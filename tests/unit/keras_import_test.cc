// What the Keras importer writes into the IR: version-dependent defaults, hard_sigmoid's two
// forms, GRU reset_after, CuDNN layers, Bidirectional and go_backwards, weights-only files and
// the formats of Keras 3. The numbers themselves are checked against Keras in
// tests/conformance/keras_conformance_test.cc; these tests pin the decisions.

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "models/training_config.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

using engine::Activation;
using engine::ActivationKind;
using engine::RecurrentSpec;
using testing::SourcePath;

engine::Model Load(const std::string& relative, const std::string& architecture = "") {
  models::LoadOptions options;
  if (!architecture.empty()) options.architecture_json_path = SourcePath(architecture);
  auto model = models::LoadModelFile(SourcePath(relative), options);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : engine::Model{};
}

const RecurrentSpec& FirstRnn(const engine::Model& m) {
  for (const auto& l : m.layers) {
    if (const auto* r = std::get_if<RecurrentSpec>(&l.spec)) return *r;
  }
  static const RecurrentSpec kNone;
  ADD_FAILURE() << "no recurrent layer";
  return kNone;
}

constexpr char kDir[] = "tests/fixtures/keras/";

TEST(KerasImport, Keras2HardSigmoidIsPointTwoXPlusHalf) {
  const auto m = Load(std::string(kDir) + "Keras2LstmHardSigmoid/model.h5");
  EXPECT_EQ(FirstRnn(m).directions[0].f, Activation::HardSigmoidKeras2());
}

TEST(KerasImport, Keras3HardSigmoidIsXOverSixPlusHalfInBothFormats) {
  for (const char* f : {"model.keras", "model.h5"}) {
    const auto m = Load(std::string(kDir) + "Keras3LstmHardSigmoid/" + f);
    EXPECT_EQ(FirstRnn(m).directions[0].f, Activation::HardSigmoidKeras3()) << f;
  }
}

TEST(KerasImport, GruResetAfterComesFromTheConfig) {
  EXPECT_TRUE(FirstRnn(Load(std::string(kDir) + "Keras2GruResetAfterTrue/model.h5")).reset_after);
  EXPECT_FALSE(FirstRnn(Load(std::string(kDir) + "Keras2GruResetAfterFalse/model.h5")).reset_after);
  EXPECT_FALSE(
      FirstRnn(Load(std::string(kDir) + "Keras3GruResetAfterFalse/model.keras")).reset_after);
}

TEST(KerasImport, CuDnnGruBecomesSigmoidResetAfterGru) {
  const auto m = Load(std::string(kDir) + "Keras2CuDNNGruConvertedLikeKeras/model.h5");
  const auto& r = FirstRnn(m);
  EXPECT_EQ(r.cell, engine::CellType::kGru);
  EXPECT_TRUE(r.reset_after);
  EXPECT_EQ(r.directions[0].f.kind, ActivationKind::kSigmoid);
  EXPECT_EQ(r.directions[0].bR.size(), 3u * r.hidden_size);
}

TEST(KerasImport, BidirectionalBackwardHalfRunsReversedTimeAligned) {
  const auto m = Load(std::string(kDir) + "Keras2BidirectionalLstmConcat/model.h5");
  const auto& r = FirstRnn(m);
  ASSERT_EQ(r.directions.size(), 2u);
  EXPECT_FALSE(r.directions[0].reverse);
  EXPECT_TRUE(r.directions[1].reverse);
  EXPECT_FALSE(r.directions[1].outputs_in_processing_order);
  EXPECT_EQ(r.merge, engine::MergeMode::kConcat);
}

TEST(KerasImport, Keras3BidirectionalReadsForwardThenBackwardLayer) {
  const auto m = Load(std::string(kDir) + "Keras3StackedBidirectionalTimeDistributed/model.keras");
  const auto& r = FirstRnn(m);
  ASSERT_EQ(r.directions.size(), 2u);
  EXPECT_TRUE(r.directions[1].reverse);
  EXPECT_NE(r.directions[0].W, r.directions[1].W);
}

TEST(KerasImport, MergeModeNoneGivesTwoOutputsPlusStates) {
  const auto m = Load(std::string(kDir) + "Keras3BidirectionalMergeNoneReturnState/model.keras");
  const auto& r = FirstRnn(m);
  EXPECT_EQ(r.merge, engine::MergeMode::kNone);
  EXPECT_EQ(m.layers.back().outputs.size(), 6u);  // fw, bw, h_fw, c_fw, h_bw, c_bw
  EXPECT_EQ(m.output_values.size(), 6u);
}

TEST(KerasImport, ReturnStateOutputsGetDistinctNamesLikeKeras) {
  const auto m = Load(std::string(kDir) + "Keras2LstmReturnState/model.h5");
  ASSERT_EQ(m.outputs.size(), 3u);
  const std::string layer = m.layers.back().name;
  EXPECT_EQ(m.outputs[0].name, layer);
  EXPECT_EQ(m.outputs[1].name, layer + "_1");
  EXPECT_EQ(m.outputs[2].name, layer + "_2");
}

TEST(KerasImport, GoBackwardsOutsideBidirectionalKeepsProcessingOrder) {
  const auto m = Load(std::string(kDir) + "Keras2LstmGoBackwardsSequences/model.h5");
  const auto& r = FirstRnn(m);
  EXPECT_TRUE(r.directions[0].reverse);
  EXPECT_TRUE(r.directions[0].outputs_in_processing_order);
}

TEST(KerasImport, DotKerasAndLegacyH5OfOneModelGiveTheSameWeights) {
  const std::string dir = std::string(kDir) + "Keras3FunctionalMerges/";
  const auto a = Load(dir + "model.keras");
  const auto b = Load(dir + "model.h5");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].source_class, b.layers[i].source_class);
    if (const auto* ra = std::get_if<RecurrentSpec>(&a.layers[i].spec)) {
      const auto& rb = std::get<RecurrentSpec>(b.layers[i].spec);
      EXPECT_EQ(ra->directions[0].W, rb.directions[0].W) << a.layers[i].name;
      EXPECT_EQ(ra->directions[0].R, rb.directions[0].R) << a.layers[i].name;
    }
  }
  EXPECT_EQ(a.source_format, "keras");
  EXPECT_EQ(b.source_format, "keras_h5");
}

TEST(KerasImport, EmbeddingInputIsInt64AndMaskZeroKept) {
  // tf-keras writes the InputLayer of this Sequential model as float32; Keras casts to int.
  for (const char* f :
       {"Keras2EmbeddingMaskZero/model.h5", "Keras3EmbeddingMaskZeroBidirectional/model.keras"}) {
    const auto m = Load(std::string(kDir) + f);
    EXPECT_EQ(m.inputs[0].dtype, engine::DType::kInt64) << f;
    EXPECT_TRUE(std::get<engine::EmbeddingSpec>(m.layers[0].spec).mask_zero) << f;
  }
}

TEST(KerasImport, BareListConfigOfKeras222Loads) {
  const auto m = Load(std::string(kDir) + "Keras2ConfigAsBareJsonList/model.h5");
  EXPECT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.producer, "keras 2.2.2");
}

TEST(KerasImport, WeightsOnlyFileWithoutArchitectureSaysWhatToSet) {
  auto m = models::LoadModelFile(
      SourcePath(std::string(kDir) + "Keras2WeightsOnlyWithArchitectureJson/weights.h5"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("architecture"), std::string::npos) << m.status();
}

TEST(KerasImport, WeightsOnlyFileLoadsWithArchitectureJson) {
  const std::string dir = std::string(kDir) + "Keras2WeightsOnlyWithArchitectureJson/";
  const auto m = Load(dir + "weights.h5", dir + "architecture.json");
  EXPECT_EQ(FirstRnn(m).hidden_size, 5);
}

// Reads `dir`/architecture.json, lets `edit` change it, and loads weights.h5 under it.
absl::StatusOr<engine::Model> LoadEditedArchitecture(
    const std::string& dir, const std::function<void(nlohmann::json*)>& edit) {
  std::ifstream in(SourcePath(dir + "architecture.json"));
  std::stringstream text;
  text << in.rdbuf();
  auto json = nlohmann::json::parse(text.str());
  edit(&json);
  // ctest runs these tests in parallel processes: each writes a file of its own.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto path = std::filesystem::path(::testing::TempDir()) /
                    (std::string(test->name()) + "_architecture.json");
  std::ofstream(path) << json.dump();
  models::LoadOptions options;
  options.architecture_json_path = path.string();
  return models::LoadModelFile(SourcePath(dir + "weights.h5"), options);
}

TEST(KerasImport, UnsupportedLayerClassFailsAtLoadNamingLayerAndClass) {
  const std::string dir = std::string(kDir) + "Keras2WeightsOnlyWithArchitectureJson/";
  auto m = LoadEditedArchitecture(dir, [](nlohmann::json* j) {
    (*j)["config"]["layers"].push_back(
        {{"class_name", "Conv2DTranspose"}, {"config", {{"name", "upsampler"}}}});
  });
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(m.status().message().find("upsampler"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("Conv2DTranspose"), std::string::npos) << m.status();
  // Custom layers are served through ONNX; the refusal says how.
  EXPECT_NE(m.status().message().find("tf2onnx"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("docs/import-keras.md"), std::string::npos) << m.status();
}

TEST(KerasImport, CuDnnWeightsUnderLstmArchitectureKeepTheConfigsActivations) {
  const std::string dir = std::string(kDir) + "Keras2CuDNNWeightsInLstmArchitecture/";
  const auto m = Load(dir + "weights.h5", dir + "architecture.json");
  const RecurrentSpec& r = FirstRnn(m);
  EXPECT_EQ(r.hidden_size, 5);
  EXPECT_EQ(r.directions[0].bR.size(), 20u);  // the recurrent half of the [8H] bias, kept
  // The CPU architecture may name other activations than cuDNN's: Keras uses the config's.
  auto hard = LoadEditedArchitecture(dir, [](nlohmann::json* j) {
    (*j)["config"]["layers"][1]["config"]["recurrent_activation"] = "hard_sigmoid";
  });
  ASSERT_TRUE(hard.ok()) << hard.status();
  EXPECT_EQ(FirstRnn(*hard).directions[0].f.kind, ActivationKind::kHardSigmoid);
}

TEST(KerasImport, CuDnnGruWeightsUnderResetAfterFalseAreRefusedAsKerasRefusesThem) {
  const std::string dir = std::string(kDir) + "Keras2CuDNNWeightsInGruArchitecture/";
  auto m = LoadEditedArchitecture(dir, [](nlohmann::json* j) {
    for (auto& layer : (*j)["config"]["layers"]) {
      if (layer["class_name"] == "GRU") layer["config"]["reset_after"] = false;
    }
  });
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("reset_after=False"), std::string::npos) << m.status();
}

TEST(KerasImport, ArchitectureWithOtherUnitsIsAShapeMismatchNamingTheLayer) {
  const std::string dir = std::string(kDir) + "Keras2WeightsOnlyWithArchitectureJson/";
  std::string lstm_name;
  auto m = LoadEditedArchitecture(dir, [&](nlohmann::json* j) {
    auto& lstm = (*j)["config"]["layers"][1];
    ASSERT_EQ(lstm["class_name"], "LSTM");
    lstm["config"]["units"] = 6;
    lstm_name = lstm["config"]["name"].get<std::string>();
  });
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(lstm_name), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("expected"), std::string::npos) << m.status();
}

// Keras 3 writes compile()'s arguments into config.json's compile_config: as strings
// (keras3_mse_strings: loss="mean_squared_error", metrics=["mae"]) and as serialized objects
// (keras3_objects_weighted: MeanSquaredError(), [MeanAbsoluteError(), RootMeanSquaredError]).
TEST(KerasImport, Keras3CompileConfigGivesLossAndMetricsInBothSpellings) {
  auto strings = models::ReadTrainingConfig(
      SourcePath("tests/fixtures/evaluate/keras3_mse_strings/1/model.keras"));
  ASSERT_TRUE(strings.ok()) << strings.status();
  ASSERT_TRUE(strings->has_value());
  EXPECT_EQ((*strings)->loss, "mse");
  ASSERT_EQ((*strings)->metrics.size(), 1u);
  EXPECT_EQ((*strings)->metrics[0].name, "mae");

  auto objects = models::ReadTrainingConfig(
      SourcePath("tests/fixtures/evaluate/keras3_objects_weighted/1/model.keras"));
  ASSERT_TRUE(objects.ok()) << objects.status();
  ASSERT_TRUE(objects->has_value());
  EXPECT_EQ((*objects)->loss, "mse");
  ASSERT_EQ((*objects)->metrics.size(), 2u);
  EXPECT_EQ((*objects)->metrics[0].fn, "MeanAbsoluteError");
  EXPECT_EQ((*objects)->metrics[1].name, "rmse");
}

// Keras 3 writes "compile_config": {} for a model saved before compile().
TEST(KerasImport, Keras3FileSavedUncompiledRecordsNoTrainingConfig) {
  auto none = models::ReadTrainingConfig(
      SourcePath(std::string(kDir) + "Keras3LstmHardSigmoid/model.keras"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

}  // namespace
}  // namespace rnnserve
