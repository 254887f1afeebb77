// TensorFlow SavedModels (models/savedmodel/) served through Servable::Load as TF Serving lays
// them out (<model>/<version>/saved_model.pb + variables/), against Keras's own predict and
// against the .h5 of the same model (tests/fixtures/savedmodel/,
// models/scripts/make_savedmodel_fixtures.py; test names match the cases). Broken SavedModels
// (truncated saved_model.pb, missing variables files, an index entry past its data file, a bad
// CRC) fail with an error that names the file and the problem.

#include <google/protobuf/text_format.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "models/training_config.h"
#include "server/servable.h"
#include "tests/support/fixtures.h"
#include "tests/unit/savedmodel_case.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using server::Servable;

TEST(SavedModelImport, SavedModelLstm) { ExpectCase("SavedModelLstm"); }
TEST(SavedModelImport, SavedModelGruResetAfterTrue) { ExpectCase("SavedModelGruResetAfterTrue"); }
TEST(SavedModelImport, SavedModelGruResetAfterFalse) { ExpectCase("SavedModelGruResetAfterFalse"); }
TEST(SavedModelImport, SavedModelSimpleRnn) { ExpectCase("SavedModelSimpleRnn"); }
TEST(SavedModelImport, SavedModelBidirectionalLstmConcat) {
  ExpectCase("SavedModelBidirectionalLstmConcat");
}
TEST(SavedModelImport, SavedModelMaskingLstm) { ExpectCase("SavedModelMaskingLstm"); }
TEST(SavedModelImport, SavedModelStackedBatchNorm) { ExpectCase("SavedModelStackedBatchNorm"); }
TEST(SavedModelImport, SavedModelEmbeddingConvLayerNormTimeDistributed) {
  ExpectCase("SavedModelEmbeddingConvLayerNormTimeDistributed");
}
TEST(SavedModelImport, SavedModelEmbeddingMaskZeroGru) {
  ExpectCase("SavedModelEmbeddingMaskZeroGru");
}
TEST(SavedModelImport, SavedModelCuDNNLstmBidirectionalCuDNNGru) {
  ExpectCase("SavedModelCuDNNLstmBidirectionalCuDNNGru");
}
TEST(SavedModelImport, SavedModelCompiledTrainingConfig) {
  ExpectCase("SavedModelCompiledTrainingConfig");
  auto saved = models::ReadTrainingConfig(CaseDir("SavedModelCompiledTrainingConfig") + "/model/1");
  auto h5 = models::ReadTrainingConfig(CaseDir("SavedModelCompiledTrainingConfig") + "/model.h5");
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE(h5.ok()) << h5.status();
  ASSERT_TRUE(saved->has_value());
  ASSERT_TRUE(h5->has_value());
  EXPECT_EQ((*saved)->loss, "sparse_categorical_crossentropy");
  EXPECT_EQ((*saved)->loss, (*h5)->loss);
  EXPECT_EQ((*saved)->from_logits, (*h5)->from_logits);
  ASSERT_EQ((*saved)->metrics.size(), (*h5)->metrics.size());
  for (size_t i = 0; i < (*h5)->metrics.size(); ++i) {
    EXPECT_EQ((*saved)->metrics[i].name, (*h5)->metrics[i].name);
  }
  // Saved uncompiled: none.
  auto none = models::ReadTrainingConfig(CaseDir("SavedModelLstm") + "/model/1");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}
TEST(SavedModelImport, SavedModelSimpleRnnDefaultSave) {
  ExpectCase("SavedModelSimpleRnnDefaultSave");
}
TEST(SavedModelImport, SavedModelFunctionalReturnStateDefaultSave) {
  ExpectCase("SavedModelFunctionalReturnStateDefaultSave");
}

// Graph-only SavedModels (no keras_metadata.pb), recognised from the serving function.
TEST(SavedModelGraphImport, Keras3ExportLstmDense) { ExpectCase("Keras3ExportLstmDense"); }
TEST(SavedModelGraphImport, Keras3ExportGruResetAfterTrue) {
  ExpectCase("Keras3ExportGruResetAfterTrue");
}
TEST(SavedModelGraphImport, Keras3ExportGruResetAfterFalse) {
  ExpectCase("Keras3ExportGruResetAfterFalse");
}
TEST(SavedModelGraphImport, Keras3ExportSimpleRnnStacked) {
  ExpectCase("Keras3ExportSimpleRnnStacked");
}
TEST(SavedModelGraphImport, Keras3ExportStackedLstmGoBackwardsGru) {
  ExpectCase("Keras3ExportStackedLstmGoBackwardsGru");
}
TEST(SavedModelGraphImport, Keras3ExportMaskingStackedLstm) {
  ExpectCase("Keras3ExportMaskingStackedLstm");
}
TEST(SavedModelGraphImport, Keras3ExportBidirectionalLstmDense) {
  ExpectCase("Keras3ExportBidirectionalLstmDense");
}
TEST(SavedModelGraphImport, Keras3ExportMaskingBidirectionalGru) {
  ExpectCase("Keras3ExportMaskingBidirectionalGru");
}
TEST(SavedModelGraphImport, Keras3ExportEmbeddingMaskZeroGruBatchNorm) {
  ExpectCase("Keras3ExportEmbeddingMaskZeroGruBatchNorm");
}
TEST(SavedModelGraphImport, Keras3ExportDenseActivationHead) {
  ExpectCase("Keras3ExportDenseActivationHead");
}
TEST(SavedModelGraphImport, TfSavedModelSaveLstmDense) { ExpectCase("TfSavedModelSaveLstmDense"); }
TEST(SavedModelGraphImport, TfSavedModelSaveGruDense) { ExpectCase("TfSavedModelSaveGruDense"); }
TEST(SavedModelGraphImport, TfSavedModelSaveMaskingSimpleRnn) {
  ExpectCase("TfSavedModelSaveMaskingSimpleRnn");
}

// hard_sigmoid's ops in an LSTM's loop body are not a recognised cell.
TEST(SavedModelGraphImport, Keras3ExportLoopBodyOpRefused) {
  auto s = LoadDir(CaseDir("Keras3ExportLoopBodyOpRefused") + "/model");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "op '")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "while")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), ".keras or .h5")) << s.status();
}

TEST(SavedModelGraphImport, Keras3ExportUnknownOpRefused) {
  auto s = LoadDir(CaseDir("Keras3ExportUnknownOpRefused") + "/model");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "op 'AddV2'")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "layer_normalization")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), ".keras or .h5")) << s.status();
}

TEST(SavedModelImport, TritonModelSavedmodelDirectoryLoads) {
  const fs::path dir = fs::path(::testing::TempDir()) / "triton_layout";
  fs::remove_all(dir);
  fs::create_directories(dir / "1");
  fs::copy(CaseDir("SavedModelLstm") + "/model/1", dir / "1" / "model.savedmodel",
           fs::copy_options::recursive);
  auto s = LoadDir(dir.string());
  ASSERT_TRUE(s.ok()) << s.status();
  // With Triton's platform name set, as a Triton config.pbtxt has it.
  v1::ModelConfig config;
  config.set_name("model");
  config.set_platform("tensorflow_savedmodel");
  auto named = Servable::Load(dir.string(), 1, config);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ((*named)->platform(), "tf_savedmodel");
}

// ----------------------------------------------------------------------------- bad files

// A copy of a case's version directory (SavedModelLstm unless said) that `damage` may break.
std::string DamagedCopy(const std::string& test, const std::function<void(const fs::path&)>& damage,
                        const std::string& from = "SavedModelLstm") {
  const fs::path dir = fs::path(::testing::TempDir()) / ("damaged_" + test);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(CaseDir(from) + "/model/1", dir / "1", fs::copy_options::recursive);
  damage(dir / "1");
  return dir.string();
}

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void ExpectLoadError(const std::string& dir, absl::StatusCode code,
                     const std::vector<std::string>& parts) {
  auto s = LoadDir(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), code) << s.status();
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(s.status().message(), part)) << s.status() << " lacks " << part;
  }
}

TEST(SavedModelBadFiles, TruncatedSavedModelPb) {
  for (double fraction : {0.0, 0.1, 0.5, 0.9}) {
    const std::string dir = DamagedCopy("truncated", [fraction](const fs::path& v) {
      const std::string bytes = ReadAll(v / "saved_model.pb");
      WriteAll(v / "saved_model.pb", bytes.substr(0, bytes.size() * fraction));
    });
    auto s = LoadDir(dir);
    ASSERT_FALSE(s.ok()) << fraction;
    EXPECT_TRUE(absl::StrContains(s.status().message(), "saved_model.pb")) << s.status();
  }
}

TEST(SavedModelBadFiles, MissingVariablesDataFile) {
  const std::string dir = DamagedCopy("missing_data", [](const fs::path& v) {
    fs::remove(v / "variables" / "variables.data-00000-of-00001");
  });
  ExpectLoadError(dir, absl::StatusCode::kNotFound, {"variables.data-00000-of-00001", "missing"});
}

TEST(SavedModelBadFiles, MissingVariablesIndex) {
  const std::string dir = DamagedCopy(
      "missing_index", [](const fs::path& v) { fs::remove(v / "variables" / "variables.index"); });
  ExpectLoadError(dir, absl::StatusCode::kNotFound, {"variables.index"});
}

TEST(SavedModelBadFiles, IndexEntryPastItsDataFile) {
  const std::string dir = DamagedCopy("past_end", [](const fs::path& v) {
    const fs::path data = v / "variables" / "variables.data-00000-of-00001";
    const std::string bytes = ReadAll(data);
    WriteAll(data, bytes.substr(0, bytes.size() / 2));
  });
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument,
                  {"variables.index", "past the end of", "variables.data-00000-of-00001"});
}

TEST(SavedModelBadFiles, DataFileFailsItsCrc) {
  const std::string dir = DamagedCopy("bad_crc", [](const fs::path& v) {
    const fs::path data = v / "variables" / "variables.data-00000-of-00001";
    std::string bytes = ReadAll(data);
    for (size_t i = 0; i < bytes.size(); i += 7) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
    WriteAll(data, bytes);
  });
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument, {"CRC-32C"});
}

TEST(SavedModelBadFiles, IndexFailsItsBlockCrc) {
  const std::string dir = DamagedCopy("bad_index_crc", [](const fs::path& v) {
    const fs::path index = v / "variables" / "variables.index";
    std::string bytes = ReadAll(index);
    bytes[10] = static_cast<char>(bytes[10] ^ 0x01);
    WriteAll(index, bytes);
  });
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument, {"variables.index", "CRC-32C"});
}

TEST(SavedModelBadFiles, TruncatedIndex) {
  const std::string dir = DamagedCopy("short_index", [](const fs::path& v) {
    const fs::path index = v / "variables" / "variables.index";
    const std::string bytes = ReadAll(index);
    WriteAll(index, bytes.substr(0, bytes.size() - 20));
  });
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument, {"variables.index"});
}

TEST(SavedModelBadFiles, TruncatedKerasMetadata) {
  const std::string dir = DamagedCopy("short_metadata", [](const fs::path& v) {
    const std::string bytes = ReadAll(v / "keras_metadata.pb");
    WriteAll(v / "keras_metadata.pb", bytes.substr(0, bytes.size() / 2));
  });
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument, {"keras_metadata.pb"});
}

// The same damage to a graph-only SavedModel (Keras 3 export, no keras_metadata.pb).
TEST(SavedModelBadFiles, GraphOnlyTruncatedSavedModelPb) {
  for (double fraction : {0.0, 0.1, 0.5, 0.9, 0.99}) {
    const std::string dir = DamagedCopy(
        "graph_truncated",
        [fraction](const fs::path& v) {
          const std::string bytes = ReadAll(v / "saved_model.pb");
          WriteAll(v / "saved_model.pb", bytes.substr(0, bytes.size() * fraction));
        },
        "Keras3ExportLstmDense");
    auto s = LoadDir(dir);
    ASSERT_FALSE(s.ok()) << fraction;
    EXPECT_TRUE(absl::StrContains(s.status().message(), "saved_model.pb")) << s.status();
  }
}

TEST(SavedModelBadFiles, GraphOnlyMissingVariablesDataFile) {
  const std::string dir = DamagedCopy(
      "graph_missing_data",
      [](const fs::path& v) { fs::remove(v / "variables" / "variables.data-00000-of-00001"); },
      "Keras3ExportLstmDense");
  ExpectLoadError(dir, absl::StatusCode::kNotFound, {"variables.data-00000-of-00001", "missing"});
}

TEST(SavedModelBadFiles, GraphOnlyMissingVariablesIndex) {
  const std::string dir = DamagedCopy(
      "graph_missing_index",
      [](const fs::path& v) { fs::remove(v / "variables" / "variables.index"); },
      "Keras3ExportLstmDense");
  ExpectLoadError(dir, absl::StatusCode::kNotFound, {"variables.index"});
}

TEST(SavedModelBadFiles, GraphOnlyIndexEntryPastItsDataFile) {
  const std::string dir = DamagedCopy(
      "graph_past_end",
      [](const fs::path& v) {
        const fs::path data = v / "variables" / "variables.data-00000-of-00001";
        const std::string bytes = ReadAll(data);
        WriteAll(data, bytes.substr(0, bytes.size() / 2));
      },
      "Keras3ExportLstmDense");
  ExpectLoadError(dir, absl::StatusCode::kInvalidArgument,
                  {"variables.index", "past the end of", "variables.data-00000-of-00001"});
}

// A byte flipped anywhere in a graph-only saved_model.pb: an error or a model, never a crash.
// Also over a functional graph of two inputs and outputs and over cuDNN ops whose params are
// evaluated from the variables.
TEST(SavedModelBadFiles, GraphOnlyFlippedBytesNeverCrash) {
  for (const char* c : {"Keras3ExportLstmDense", "Keras3ExportTwoInputsTwoOutputs",
                        "Keras3ExportCudnnGruLstmDense"}) {
    const std::string pb = ReadAll(CaseDir(c) + "/model/1/saved_model.pb");
    for (size_t i = 0; i < pb.size(); i += 1009) {
      const std::string dir = DamagedCopy(
          "graph_flipped",
          [&](const fs::path& v) {
            std::string bytes = pb;
            bytes[i] = static_cast<char>(bytes[i] ^ 0xff);
            WriteAll(v / "saved_model.pb", bytes);
          },
          c);
      auto s = LoadDir(dir);
      if (!s.ok()) {
        EXPECT_FALSE(s.status().message().empty()) << c << " " << i;
      }
    }
  }
}

TEST(SavedModelImport, ModelLoaderRecognisesTheDirectory) {
  EXPECT_TRUE(models::IsModelFile(CaseDir("SavedModelLstm") + "/model/1"));
  EXPECT_FALSE(models::IsModelFile(CaseDir("SavedModelLstm") + "/model"));
  auto m = models::LoadModelFile(CaseDir("SavedModelLstm") + "/model/1/saved_model.pb");
  ASSERT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace rnnserve::testing
