// libFuzzer target: Keras .h5 files (Keras 2, tf.keras, Keras 3 legacy) from bytes. Any input
// must give a model that validates or an error; never a crash, a hang or a leak.

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/keras/keras_h5.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = rnnserve::models::keras::LoadKerasH5Bytes(bytes, "fuzz.h5");
  if (model.ok()) (void)model->Validate();
  return 0;
}
