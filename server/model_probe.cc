#include "server/model_probe.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/batch_layout.h"
#include "server/servable.h"

namespace rnnserve::server {

engine::Batch ProbeBatch(const std::vector<TensorSignature>& inputs, int64_t B, int64_t T) {
  engine::Batch batch;
  for (const TensorSignature& in : inputs) {
    engine::Shape shape = MoveAxis(in.shape, in.batch_axis, 0);
    shape[0] = B;
    for (size_t i = 1; i < shape.size(); ++i) {
      if (shape[i] < 0) shape[i] = T;
    }
    if (in.dtype == engine::DType::kInt64) {
      batch.inputs.push_back(
          engine::Tensor::Int64(shape, std::vector<int64_t>(engine::NumElements(shape), 1)));
    } else {
      batch.inputs.push_back(
          engine::Tensor::Float(shape, std::vector<float>(engine::NumElements(shape), 0.125f)));
    }
  }
  return batch;
}

engine::Batch DistinctRowsProbe(const std::vector<TensorSignature>& inputs) {
  engine::Batch pair = ProbeBatch(inputs, 2, 3);
  for (engine::Tensor& t : pair.inputs) {
    if (t.dtype() != engine::DType::kFloat32) continue;
    const int64_t row = t.num_elements() / 2;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      t.f32()[i] = 0.25f * static_cast<float>(i % 7) - 0.5f + (i < row ? 0.375f : -0.25f);
    }
  }
  return pair;
}

std::string BatchAxisProblem(const std::vector<engine::Tensor>& both,
                             const std::vector<engine::Tensor>& alone,
                             const std::vector<std::string>& names) {
  // Row 1 of a two-row probe must equal the same row run alone. On a time-major model row 1
  // is the second time step, which depends on the first through the recurrent state.
  for (size_t o = 0; o < both.size() && o < alone.size(); ++o) {
    const engine::Tensor &b = both[o], &a = alone[o];
    const std::string name = o < names.size() ? names[o] : std::to_string(o);
    if (b.rank() == 0 || a.rank() == 0 || b.dim(0) != 2 || a.dim(0) != 1 ||
        b.num_elements() != 2 * a.num_elements() || b.dtype() != a.dtype()) {
      return absl::StrCat("output '", name, "' has shape ", engine::ShapeString(b.shape()),
                          " for 2 input rows: axis 0 is not the batch axis");
    }
    const int64_t n = a.num_elements();
    for (int64_t i = 0; i < n && a.dtype() == engine::DType::kFloat32; ++i) {
      const float x = b.f32()[n + i], y = a.f32()[i];
      if (!(std::fabs(x - y) <= 1e-4f * std::max(1.0f, std::fabs(y)))) {
        return absl::StrCat("row 1 of output '", name,
                            "' depends on input row 0: axis 0 is not the batch axis (a "
                            "time-major model?)");
      }
    }
  }
  return "";
}

}  // namespace rnnserve::server
