// libFuzzer target for the ONNX importer: any bytes either load into a valid Model or give a
// load error; never a crash, a leak or undefined behaviour. A model that loads is compiled and
// run once on zero inputs of its declared shapes (symbolic dims as 2), when they are small, so
// the generic tensor ops and the recurrent kernel see fuzzed graphs too.
//
// Built and run by tests/fuzz/run_onnx_fuzz.sh (clang, -DRNNSERVE_FUZZ_ONNX=ON).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "models/onnx/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rnnserve;
  auto model = models::onnx::LoadOnnxBytes(std::string(reinterpret_cast<const char*>(data), size),
                                           "fuzz.onnx");
  if (!model.ok()) return 0;
  auto engine = engine::Engine::Create({.kind = engine::EngineKind::kCpu});
  if (!engine.ok()) return 0;
  auto compiled = (*engine)->Compile(*model, {.num_threads = 1});
  if (!compiled.ok()) return 0;
  engine::Batch batch;
  for (const engine::ValueInfo& in : model->inputs) {
    engine::Shape shape = in.shape;
    int64_t n = 1;
    for (int64_t& d : shape) {
      if (d < 0) d = 2;
      if (d > 64) return 0;
      n *= d;
    }
    if (n > 4096) return 0;
    batch.inputs.push_back(in.dtype == engine::DType::kInt64 ? engine::Tensor::Int64(shape)
                                                             : engine::Tensor::Float(shape));
  }
  std::vector<engine::Tensor> out;
  (*compiled)->Run(batch, &out).IgnoreError();
  return 0;
}
