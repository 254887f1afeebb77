// SavedModels whose Bidirectional layers merge by sum, mul, ave or not at all (merge_mode=None:
// two outputs), and functional models of several inputs and outputs, in Keras-made (tf_keras
// keras_metadata.pb) and graph-only (Keras 3 `model.export`, `tf.saved_model.save`)
// SavedModels: against Keras's predict and the same model's .h5 / .keras, with the names,
// dtypes and shapes of the serving signature as TensorFlow reads it
// (tests/fixtures/savedmodel/, models/scripts/make_savedmodel_fixtures.py; test names match
// the cases).

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

// Several inputs and outputs.
TEST(SavedModelSeveralInputsOutputs, SavedModelTwoInputsTwoOutputsDefaultSave) {
  ExpectCase("SavedModelTwoInputsTwoOutputsDefaultSave");
}

}  // namespace
}  // namespace rnnserve::testing
