// libFuzzer target for graph-only SavedModels (models/savedmodel/savedmodel_graph.cc, the
// function graph walk and layer recogniser): any bytes as saved_model.pb, beside the variables
// of the Keras3ExportLstmDense fixture and no keras_metadata.pb, either give a model or a load
// error; never a crash, a hang, a leak or undefined behaviour. The corpus holds the
// saved_model.pb files of Keras 3 export fixtures.

#include <cstddef>
#include <cstdint>
#include <string>

#include "models/savedmodel/savedmodel.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kDir =
      std::string(RNNSERVE_SOURCE_DIR) + "/tests/fixtures/savedmodel/Keras3ExportLstmDense/model/1";
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto model = rnnserve::models::savedmodel::LoadSavedModelBytes(kDir, bytes);
  if (!model.ok() && model.status().message().empty()) __builtin_trap();
  return 0;
}
