// libFuzzer target: config.pbtxt. Any text either parses and validates into a config or gives
// an error naming the line; a config that validates is then used to build the example model's
// servable (instances, batching, sequence and input settings checked against the model) and,
// without dynamic batching, to run one request on it.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "models/model_loader.h"
#include "server/log.h"
#include "server/model_config.h"
#include "server/servable.h"

namespace {

const rnnserve::engine::Model& ExampleModel() {
  static const auto* const model = [] {
    rnnserve::server::SetLogLevel(rnnserve::server::LogLevel::kError);
    auto m = rnnserve::models::LoadModelFile(
        RNNSERVE_SOURCE_DIR "/models/examples/waveform_lstm/1/model.h5", {});
    if (!m.ok()) std::abort();
    return new rnnserve::engine::Model(std::move(*m));
  }();
  return *model;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rnnserve;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = server::ParseModelConfig(text, "config.pbtxt");
  if (!config.ok()) return 0;
  // Bound the work one input may ask for: a few instances of a few threads.
  int64_t instances = 0;
  for (const auto& g : config->instance_group()) instances += g.count() > 0 ? g.count() : 1;
  if (instances > 4 || config->optimization().cpu_threads() > 4) return 0;
  config->set_name("fuzz");
  auto servable = server::Servable::FromModel(ExampleModel(), 1, *config);
  if (!servable.ok() || config->has_dynamic_batching()) return 0;
  engine::Batch batch;
  batch.inputs.push_back(engine::Tensor::Float({1, 3, 2}, std::vector<float>(6, 0.25f)));
  std::vector<engine::Tensor> outputs;
  (*servable)->Run(batch, &outputs, {}).IgnoreError();
  return 0;
}
