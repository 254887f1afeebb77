#include "tests/support/zero_length.h"

#include <vector>

#include "tests/support/fixtures.h"

namespace rnnserve::testing {

::testing::AssertionResult ZeroLengthRowActsAsAFullyMaskedOne(engine::CompiledModel* compiled) {
  const client::NpyArray input = LoadNpy("tests/fixtures/example/input.npy");        // [3, 40, 2]
  const client::NpyArray expected = LoadNpy("tests/fixtures/example/expected.npy");  // [3, 3]
  const int64_t C = expected.shape[1];
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(input));
  batch.lengths = {40, 0, 12};
  std::vector<engine::Tensor> out;
  if (absl::Status s = compiled->Run(batch, &out); !s.ok()) {
    return ::testing::AssertionFailure() << "lengths {40, 0, 12}: " << s;
  }
  engine::Batch masked;  // one all-zero row: every step masked
  masked.inputs.push_back(engine::Tensor::Float({1, input.shape[1], input.shape[2]}));
  std::vector<engine::Tensor> masked_out;
  if (absl::Status s = compiled->Run(masked, &masked_out); !s.ok()) {
    return ::testing::AssertionFailure() << "all-zero row: " << s;
  }
  const engine::Tensor& got = out.at(0);  // [3, C]
  for (int64_t b : {0, 2}) {
    client::NpyArray want{"<f8", {1, C}, {}};
    want.values.assign(expected.values.begin() + b * C, expected.values.begin() + (b + 1) * C);
    std::vector<float> row(got.f32() + b * C, got.f32() + (b + 1) * C);
    if (auto r = AllClose(engine::Tensor::Float({1, C}, row), want); !r) {
      return r << " (row " << b << " beside a zero-length row, against Keras)";
    }
  }
  client::NpyArray want{"<f8", {1, C}, {}};
  want.values.assign(masked_out.at(0).f32(), masked_out.at(0).f32() + C);
  std::vector<float> row(got.f32() + C, got.f32() + 2 * C);
  if (auto r = AllClose(engine::Tensor::Float({1, C}, row), want); !r) {
    return r << " (the zero-length row against a fully masked row)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rnnserve::testing
