#include "engine/cuda/resident_model.h"

#include <algorithm>
#include <numeric>
#include <variant>

#include "absl/strings/str_cat.h"
#include "engine/cuda/resident_loop.h"

namespace rnnserve::engine::cuda {

ResidentPlan PlanResident(const Model& model) {
  ResidentPlan plan;
  auto fail = [&plan](std::string why) {
    plan.layer = nullptr;
    plan.why = std::move(why);
    plan.outputs.clear();
    return plan;
  };
  if (model.inputs.size() != 1) return fail("the model has more than one input");
  std::vector<int> alias(model.num_values);
  std::iota(alias.begin(), alias.end(), 0);
  for (const Layer& l : model.layers) {
    if (std::holds_alternative<IdentitySpec>(l.spec) && l.inputs.size() == 1 &&
        l.outputs.size() == 1) {
      alias[l.outputs[0]] = alias[l.inputs[0]];
      continue;
    }
    const auto* spec = std::get_if<RecurrentSpec>(&l.spec);
    if (spec == nullptr || plan.layer != nullptr) {
      return fail(absl::StrCat("layer ", l.name, " (", l.source_class,
                               ") is not the model's one recurrent layer"));
    }
    if (l.inputs.size() != 1 || alias[l.inputs[0]] != 0) {
      return fail(absl::StrCat("layer ", l.name, " reads more than the model's input"));
    }
    if (const std::string why = ResidentLoop::Unsupported(*spec); !why.empty()) {
      return fail(absl::StrCat("layer ", l.name, " has ", why));
    }
    plan.layer = &l;
  }
  if (plan.layer == nullptr) return fail("the model has no recurrent layer");
  for (int v : model.output_values) {
    const auto& outs = plan.layer->outputs;
    const auto it = std::find(outs.begin(), outs.end(), alias[v]);
    if (it == outs.end()) return fail("a model output is not the recurrent layer's");
    plan.outputs.push_back(static_cast<int>(it - outs.begin()));
  }
  return plan;
}

}  // namespace rnnserve::engine::cuda
