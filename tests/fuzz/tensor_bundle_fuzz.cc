// libFuzzer target for a SavedModel checkpoint's index (models/savedmodel/tensor_bundle.h and
// its table reader, sstable.h): any bytes as variables.index either give a bundle whose every
// entry lies inside its (pretend) data file, or a load error; never a crash, a leak or
// undefined behaviour. The corpus holds the index files of the SavedModel fixtures.

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/savedmodel/tensor_bundle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using rnnserve::models::savedmodel::TensorBundle;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto bundle = TensorBundle::FromIndex(bytes, "fuzz/variables", {4096, 4096});
  if (!bundle.ok()) return 0;
  for (const auto& [key, entry] : bundle->entries()) {
    if (entry.offset < 0 || entry.size < 0 || entry.offset + entry.size > 4096) __builtin_trap();
  }
  return 0;
}
