// CudaCompiledModel as a StepLoopSource (engine/step_loop.h): a model the resident loop runs
// whole (resident_model.h) gets a ResidentLoop over its one recurrent layer.

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/resident_loop.h"
#include "engine/cuda/resident_model.h"

namespace rnnserve::engine::cuda {
namespace {

class ResidentStepLoop final : public StepLoop {
 public:
  ResidentStepLoop(std::unique_ptr<ResidentLoop> loop, const Layer& layer, ResidentPlan plan)
      : loop_(std::move(loop)),
        layer_name_(layer.name),
        sequences_(std::get<RecurrentSpec>(layer.spec).return_sequences),
        plan_(std::move(plan)) {}

  int capacity() const override { return loop_->capacity(); }
  int max_steps() const override { return loop_->max_steps(); }
  std::vector<Shape> output_rows() const override {
    return std::vector<Shape>(plan_.outputs.size(), Shape{loop_->hidden_size()});
  }

  absl::Status Join(int slot, const Tensor& input, int64_t row, int length) override {
    if (input.dtype() != DType::kFloat32 || input.rank() != 3 ||
        input.dim(2) != loop_->input_size()) {
      return absl::InvalidArgumentError(absl::StrCat("step loop: the input must be float32 [B, T, ",
                                                     loop_->input_size(), "]; is ",
                                                     ShapeString(input.shape())));
    }
    if (row < 0 || row >= input.dim(0) || length > input.dim(1)) {
      return absl::InvalidArgumentError(absl::StrCat("step loop: row ", row, " length ", length,
                                                     " outside the input ",
                                                     ShapeString(input.shape())));
    }
    return loop_->Join(slot, input.f32() + row * input.dim(1) * input.dim(2), length);
  }
  bool Started(int slot) const override { return loop_->Started(slot); }
  bool Done(int slot) const override { return loop_->Done(slot); }

  absl::Status Outputs(int slot, std::vector<Tensor>* outputs,
                       StateMap* final_states) const override {
    if (slot < 0 || slot >= capacity() || !loop_->Done(slot)) {
      return absl::FailedPreconditionError(
          absl::StrCat("step loop: slot ", slot, " has no finished sequence"));
    }
    const int64_t H = loop_->hidden_size();
    auto row = [H](const float* p) {
      Tensor t = Tensor::Float({1, H});
      std::copy(p, p + H, t.f32());
      return t;
    };
    outputs->clear();
    for (int which : plan_.outputs) {
      if (which == 0 && sequences_) {
        const int64_t n = loop_->length(slot);
        Tensor t = Tensor::Float({n, H});
        std::copy(loop_->outputs(slot), loop_->outputs(slot) + n * H, t.f32());
        outputs->push_back(std::move(t));
      } else {
        outputs->push_back(row(which == 2 ? loop_->final_c(slot) : loop_->final_h(slot)));
      }
    }
    if (final_states != nullptr) {
      std::vector<Tensor>& states = (*final_states)[layer_name_];
      states.clear();
      states.push_back(row(loop_->final_h(slot)));
      if (loop_->final_c(slot) != nullptr) states.push_back(row(loop_->final_c(slot)));
    }
    return absl::OkStatus();
  }

 private:
  const std::unique_ptr<ResidentLoop> loop_;
  const std::string layer_name_;
  const bool sequences_;
  const ResidentPlan plan_;
};

}  // namespace

std::string CudaCompiledModel::StepLoopUnsupported() const { return PlanResident(model_).why; }

absl::StatusOr<std::unique_ptr<StepLoop>> CudaCompiledModel::NewStepLoop(int capacity,
                                                                         int max_steps) {
  ResidentPlan plan = PlanResident(model_);
  if (plan.layer == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the resident step loop does not run this model: ", plan.why));
  }
  const Layer& layer = *plan.layer;
  auto loop = ResidentLoop::Create(
      std::get<RecurrentSpec>(layer.spec),
      {.device = device_,
       .capacity = capacity,
       .max_steps = max_steps,
       .per_step_outputs = std::get<RecurrentSpec>(layer.spec).return_sequences});
  if (!loop.ok()) return loop.status();
  return std::make_unique<ResidentStepLoop>(*std::move(loop), layer, std::move(plan));
}

}  // namespace rnnserve::engine::cuda
