#include "engine/cpu/host_fallback.h"

#include <string>
#include <utility>
#include <vector>

#include "engine/cpu/host_layer.h"
#include "engine/cpu/recurrent.h"

namespace rnnserve::engine::cpu {
namespace {

class CpuHostRecurrent final : public HostRecurrent {
 public:
  explicit CpuHostRecurrent(std::unique_ptr<RecurrentKernel> kernel) : kernel_(std::move(kernel)) {}

  absl::Status Run(const Tensor& x, absl::Span<const int32_t> lengths,
                   absl::Span<const uint8_t> step_mask, absl::Span<const Tensor> initial_states,
                   std::vector<Tensor>* outputs, std::vector<Tensor>* final_states,
                   bool continues) override {
    return kernel_->Run(x, lengths, step_mask, initial_states, outputs, final_states, continues);
  }
  int num_outputs() const override { return kernel_->num_outputs(); }
  int num_sequence_outputs() const override { return kernel_->num_sequence_outputs(); }

 private:
  const std::unique_ptr<RecurrentKernel> kernel_;
};

class CpuHostFallback final : public HostFallback {
 public:
  absl::StatusOr<std::unique_ptr<HostRecurrent>> NewRecurrent(
      const RecurrentSpec& spec, const std::string& name) const override {
    auto kernel = RecurrentKernel::Create(spec, name);
    if (!kernel.ok()) return kernel.status();
    return std::make_unique<CpuHostRecurrent>(*std::move(kernel));
  }
  absl::Status RunLayer(const Layer& layer, std::vector<HostValue>* values) const override {
    return RunHostLayer(layer, values);
  }
};

}  // namespace

std::shared_ptr<const HostFallback> NewHostFallback() {
  return std::make_shared<const CpuHostFallback>();
}

}  // namespace rnnserve::engine::cpu
