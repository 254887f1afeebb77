// libFuzzer target: the Keras model config JSON (Sequential lists and dicts, functional graphs,
// Keras 2 and Keras 3 node formats, every layer converter). Zip CRCs and HDF5 checksums keep
// the other targets' mutations away from the JSON, so it gets its own target. Each layer gets
// small weight arrays shaped from its config where that is easy (units, kernel, bias), so the
// converters run past their weight checks.

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/keras/keras_config.h"

namespace {

using rnnserve::models::keras::Array;

Array Make(std::vector<int64_t> shape) {
  Array a;
  a.shape = shape;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  a.data.assign(static_cast<size_t>(n), 0.125f);
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  rnnserve::models::keras::KerasSource source{.file = "fuzz.json",
                                              .format = "keras_h5",
                                              .keras_version = (size / 3) % 2 ? "2.2.4" : "3.8.0"};
  // The input size picks a weight layout: none, a 4-unit LSTM-sized set, or a Dense-sized set.
  const int mode = static_cast<int>(size % 3);
  auto weights = [mode](const std::string&) -> absl::StatusOr<std::vector<Array>> {
    if (mode == 1) return std::vector<Array>{Make({3, 16}), Make({4, 16}), Make({16})};
    if (mode == 2) return std::vector<Array>{Make({4, 2}), Make({2})};
    return std::vector<Array>{};
  };
  auto model = rnnserve::models::keras::BuildModel(json, source, weights);
  if (model.ok()) (void)model->Validate();
  return 0;
}
