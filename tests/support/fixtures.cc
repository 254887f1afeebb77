#include "tests/support/fixtures.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace rnnserve::testing {

std::string SourcePath(const std::string& relative) {
  return absl::StrCat(RNNSERVE_SOURCE_DIR, "/", relative);
}

std::string SharedModelsDir() {
  const std::filesystem::path dir =
      std::filesystem::path(RNNSERVE_SOURCE_DIR).parent_path() / "shared/models/keras-real";
  return std::filesystem::is_directory(dir) ? dir.string() : "";
}

client::NpyArray LoadNpy(const std::string& relative) {
  auto a = client::ReadNpy(SourcePath(relative));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *a : client::NpyArray{};
}

engine::Tensor ToFloatTensor(const client::NpyArray& a) {
  return engine::Tensor::Float(a.shape, std::vector<float>(a.values.begin(), a.values.end()));
}

engine::Tensor ToInt64Tensor(const client::NpyArray& a) {
  std::vector<int64_t> v(a.values.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(a.values[i]);
  return engine::Tensor::Int64(a.shape, std::move(v));
}

::testing::AssertionResult AllClose(const engine::Tensor& got, const client::NpyArray& want,
                                    double rtol, double atol) {
  if (got.shape() != want.shape) {
    return ::testing::AssertionFailure() << "shape " << engine::ShapeString(got.shape())
                                         << " != expected " << engine::ShapeString(want.shape);
  }
  double worst = 0.0;
  int64_t worst_i = -1;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    const double g = got.f32()[i], w = want.values[i];
    const double excess = std::fabs(g - w) - (atol + rtol * std::fabs(w));
    if (!(excess <= worst)) {
      worst = std::isnan(excess) ? INFINITY : excess;
      worst_i = i;
    }
  }
  if (worst_i < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << worst_i << ": got " << got.f32()[worst_i] << ", expected "
         << want.values[worst_i] << " (rtol " << rtol << ", atol " << atol << ")";
}

}  // namespace rnnserve::testing
