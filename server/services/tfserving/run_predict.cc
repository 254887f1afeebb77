#include "server/services/tfserving/run_predict.h"

#include <utility>

#include "server/log.h"

namespace rnnserve::server::tfserving {

void RunPredict(std::shared_ptr<const Servable> model, const core::Request& request,
                int64_t request_bytes, const limits::RequestLimits& limits, RunOptions options,
                PredictDone done) {
  auto admission = limits::Admit(limits, *model, options.caller, request_bytes);
  if (!admission.ok()) return done(admission.status());
  if (auto s = core::ValidateOutputFilter(request, model->signature()); !s.ok()) return done(s);
  auto batch = core::Validate(request, model->signature());
  if (!batch.ok()) return done(batch.status());
  if (auto s = admission->AddBatch(*batch); !s.ok()) return done(s);
  const Servable& m = *model;
  m.RunAsync(*std::move(batch), options,
             [model = std::move(model), admission = *std::move(admission),
              done = std::move(done)](absl::StatusOr<std::vector<engine::Tensor>> outputs) mutable {
               if (!outputs.ok()) LogRunFailure(model->name(), model->version(), outputs.status());
               { limits::Admission released = std::move(admission); }
               done(std::move(outputs));
             });
}

}  // namespace rnnserve::server::tfserving
