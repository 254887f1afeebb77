#pragma once

// One SavedModel fixture case (tests/fixtures/savedmodel/<Case>/, made by
// models/scripts/make_savedmodel_fixtures.py), shared by the SavedModel import tests.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/servable.h"

namespace rnnserve::testing {

// tests/fixtures/savedmodel/<name>, absolute.
std::string CaseDir(const std::string& name);

// Servable::Load of a model directory (<dir>/<version>/...), as the repository loads it.
absl::StatusOr<std::unique_ptr<server::Servable>> LoadDir(const std::string& model_dir);

// The SavedModel served from <case>/model/1 matches Keras's predict to 1e-5, the same model's
// .h5 (or, for Keras 3, .keras) gives the same numbers, and the SavedModel's input and output
// names, dtypes and shapes are the serving signature's as TensorFlow reads it (signature.json)
// where the model has one. Inputs and outputs are matched by name: input_<i>.npy and
// expected_<i>.npy follow Keras's order, signature.json's input_order and output_order say
// which signature key each one is. `compare_keras_file` false leaves the .h5 / .keras out.
void ExpectCase(const std::string& name, bool compare_keras_file = true);

}  // namespace rnnserve::testing
