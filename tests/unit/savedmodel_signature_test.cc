// SavedModels whose Bidirectional layers merge by sum, mul, ave or not at all (merge_mode=None:
// two outputs), and functional models of several inputs and outputs, in Keras-made (tf_keras
// keras_metadata.pb) and graph-only (Keras 3 `model.export`, `tf.saved_model.save`)
// SavedModels: against Keras's predict and the same model's .h5 / .keras, with the names,
// dtypes and shapes of the serving signature as TensorFlow reads it
// (tests/fixtures/savedmodel/, models/scripts/make_savedmodel_fixtures.py; test names match
// the cases).

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/savedmodel_case.h"

namespace rnnserve::testing {
namespace {

// tf_keras model.save(dir) (keras_metadata.pb).
TEST(SavedModelMergeModes, SavedModelBidirectionalGruSum) {
  ExpectCase("SavedModelBidirectionalGruSum");
}
TEST(SavedModelMergeModes, SavedModelBidirectionalLstmMul) {
  ExpectCase("SavedModelBidirectionalLstmMul");
}
TEST(SavedModelMergeModes, SavedModelBidirectionalSimpleRnnAve) {
  ExpectCase("SavedModelBidirectionalSimpleRnnAve");
}
TEST(SavedModelMergeModes, SavedModelBidirectionalGruMergeNone) {
  ExpectCase("SavedModelBidirectionalGruMergeNone");
}

// Graph-only: tf.saved_model.save of a tf_keras model's serving function.
TEST(SavedModelMergeModes, TfModuleSaveBidirectionalGruAve) {
  ExpectCase("TfModuleSaveBidirectionalGruAve");
}
TEST(SavedModelMergeModes, TfModuleSaveBidirectionalLstmSum) {
  ExpectCase("TfModuleSaveBidirectionalLstmSum");
}
TEST(SavedModelMergeModes, TfModuleSaveBidirectionalSimpleRnnMul) {
  ExpectCase("TfModuleSaveBidirectionalSimpleRnnMul");
}

// Graph-only: Keras 3 model.export(dir).
TEST(SavedModelMergeModes, Keras3ExportBidirectionalGruSum) {
  ExpectCase("Keras3ExportBidirectionalGruSum");
}
TEST(SavedModelMergeModes, Keras3ExportBidirectionalLstmMul) {
  ExpectCase("Keras3ExportBidirectionalLstmMul");
}
TEST(SavedModelMergeModes, Keras3ExportBidirectionalSimpleRnnAve) {
  ExpectCase("Keras3ExportBidirectionalSimpleRnnAve");
}
TEST(SavedModelMergeModes, Keras3ExportBidirectionalGruMergeNone) {
  ExpectCase("Keras3ExportBidirectionalGruMergeNone");
}

// Several inputs and outputs.
TEST(SavedModelSeveralInputsOutputs, SavedModelTwoInputsTwoOutputsDefaultSave) {
  ExpectCase("SavedModelTwoInputsTwoOutputsDefaultSave");
}
TEST(SavedModelSeveralInputsOutputs, Keras3ExportTwoInputsTwoOutputs) {
  ExpectCase("Keras3ExportTwoInputsTwoOutputs");
}
TEST(SavedModelSeveralInputsOutputs, Keras3ExportTwoInputsMergeLayers) {
  ExpectCase("Keras3ExportTwoInputsMergeLayers");
}
// One Masking layer masks two recurrent branches. Its .keras file passes the mask to them as
// NotEqual/Any op layers, which the .keras reader does not take: against Keras's predict only.
TEST(SavedModelSeveralInputsOutputs, Keras3ExportMaskingTwoBranches) {
  ExpectCase("Keras3ExportMaskingTwoBranches", /*compare_keras_file=*/false);
}

// Keras 3 exports traced as on a GPU: the layers are CudnnRNNV3 ops.
TEST(SavedModelCudnnRnn, Keras3ExportCudnnLstmGru) { ExpectCase("Keras3ExportCudnnLstmGru"); }
TEST(SavedModelCudnnRnn, Keras3ExportCudnnGruLstmDense) {
  ExpectCase("Keras3ExportCudnnGruLstmDense");
}

TEST(SavedModelCudnnRnn, Keras3ExportCudnnBidirectionalLstmGru) {
  ExpectCase("Keras3ExportCudnnBidirectionalLstmGru");
}

// A masked cuDNN layer takes its rows' lengths from the mask: refused, saying so.
TEST(SavedModelCudnnRnn, Keras3ExportCudnnMaskedRefused) {
  auto s = LoadDir(CaseDir("Keras3ExportCudnnMaskedRefused") + "/model");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "CudnnRNNV3 (sequence_lengths from a mask)"))
      << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), ".keras or .h5")) << s.status();
}

}  // namespace
}  // namespace rnnserve::testing
