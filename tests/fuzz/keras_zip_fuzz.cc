// libFuzzer target: Keras 3 .keras archives from bytes (zip structure, entry names and sizes,
// config.json, metadata.json, the embedded model.weights.h5).

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/keras/keras_zip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = rnnserve::models::keras::LoadKerasZipBytes(bytes, "fuzz.keras");
  if (model.ok()) (void)model->Validate();
  return 0;
}
