#pragma once

// Helpers for tests that compare our numbers with fixtures made by the real frameworks.

#include <string>
#include <vector>

#include "client/npy.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"

namespace rnnserve::testing {

// Absolute path of a file under the source tree.
std::string SourcePath(const std::string& relative);

// ../shared/models/keras-real beside the checkout, or "" when absent.
std::string SharedModelsDir();

client::NpyArray LoadNpy(const std::string& relative);
engine::Tensor ToFloatTensor(const client::NpyArray& a);
engine::Tensor ToInt64Tensor(const client::NpyArray& a);

// Element-wise |got - want| <= atol + rtol * |want|; reports the worst element.
::testing::AssertionResult AllClose(const engine::Tensor& got, const client::NpyArray& want,
                                    double rtol = 1e-5, double atol = 1e-6);

}  // namespace rnnserve::testing
