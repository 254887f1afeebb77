#include "server/services/rnnserve_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/log.h"
#include "server/tensor_codec.h"

namespace rnnserve::server {
namespace {

void FillInfo(const TensorSignature& sig, v1::TensorInfo* info) {
  info->set_name(sig.name);
  info->set_dtype(WireType(sig.dtype));
  for (int64_t d : sig.shape) info->add_shape(d);
}

// What a Predict call keeps until its response is built: the model, its admission (the
// request's bytes and its place on the model) and the final states the engine fills. Holding
// the model lets a version unloaded meanwhile still answer.
struct PredictCall {
  std::shared_ptr<const Servable> model;
  limits::Admission admission;
  LayerStates final_states;
};

// Fills `response` from a Predict's outputs, the ones `request` asks for.
void EncodePredict(const v1::PredictRequest& request, const PredictCall& call,
                   const std::vector<engine::Tensor>& outputs, v1::PredictResponse* response) {
  const Servable& model = *call.model;
  response->mutable_model_spec()->set_name(model.name());
  response->mutable_model_spec()->set_version(model.version());
  EncodeOutputs(model, request.output_filter(), outputs, response->mutable_outputs());
  for (const auto& [layer, states] : call.final_states) {
    v1::LayerStates& out = (*response->mutable_final_states())[layer];
    for (const engine::Tensor& t : states) EncodeTensor(t, out.add_states());
  }
}

}  // namespace

grpc::ServerUnaryReactor* RnnServeService::Predict(grpc::CallbackServerContext* context,
                                                   const v1::PredictRequest* request,
                                                   v1::PredictResponse* response) {
  const UnaryStart start(context);
  if (start.refused()) return start.reactor();
  grpc::ServerUnaryReactor* reactor = start.reactor();
  auto fail = [&start](const absl::Status& s) { return start.Fail(s); };
  auto servable = repository_->Get(request->model_spec().name(), request->model_spec().version());
  if (!servable.ok()) return fail(servable.status());
  const Servable& model = **servable;
  auto admission = limits::Admit(limits_.requests, model, limits::CallerIdentity(*context),
                                 static_cast<int64_t>(request->ByteSizeLong()));
  if (!admission.ok()) return fail(admission.status());
  const core::Request decoded = DecodePredict(*request);
  if (auto s = core::ValidateOutputFilter(decoded, model.signature()); !s.ok()) return fail(s);
  auto batch = core::Validate(decoded, model.signature());
  if (!batch.ok()) return fail(batch.status());
  if (auto s = admission->AddBatch(*batch); !s.ok()) return fail(s);
  auto call = std::make_unique<PredictCall>(
      PredictCall{.model = *servable, .admission = *std::move(admission), .final_states = {}});
  if (request->return_states()) batch->final_states = &call->final_states;
  RunOptions options = RunOptionsFor(*context);
  options.allocate_outputs =
      AllocateOutputs(model, request->output_filter(), response->mutable_outputs());
  model.RunAsync(*std::move(batch), options,
                 [call = std::move(call), request, response,
                  reactor](absl::StatusOr<std::vector<engine::Tensor>> outputs) mutable {
                   const absl::Status s = outputs.status();
                   if (s.ok()) {
                     EncodePredict(*request, *call, *outputs, response);
                   } else {
                     LogRunFailure(call->model->name(), call->model->version(), s);
                   }
                   // Released before the answer goes out, as a synchronous handler would.
                   call.reset();
                   reactor->Finish(ToGrpc(s));
                 });
  return reactor;
}

grpc::Status RnnServeService::ModelMetadata(grpc::ServerContext* context,
                                            const v1::ModelMetadataRequest* request,
                                            v1::ModelMetadataResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  auto servable = repository_->Get(request->model_spec().name(), request->model_spec().version());
  if (!servable.ok()) return ToGrpc(servable.status());
  const Servable& model = **servable;
  response->mutable_model_spec()->set_name(model.name());
  response->mutable_model_spec()->set_version(model.version());
  for (const ModelState& state : repository_->List()) {
    if (state.name == model.name()) {
      for (int64_t v : state.versions) response->add_versions(v);
    }
  }
  response->set_platform(model.platform());
  response->set_source_file(repository_->RelativePath(model.source_file()));
  response->set_masking(model.masking());
  response->set_streamable(model.streamable().ok());
  response->set_streamable_reason(std::string(model.streamable().message()));
  response->set_lengths(model.lengths().honored.ok());
  response->set_lengths_reason(std::string(model.lengths().honored.message()));
  response->set_scheduler(model.scheduler());
  response->set_scheduler_reason(model.scheduler_reason());
  for (const auto& sig : model.inputs()) FillInfo(sig, response->add_inputs());
  for (const auto& sig : model.outputs()) FillInfo(sig, response->add_outputs());
  for (const InstanceInfo& info : model.instances()) {
    v1::InstanceInfo* out = response->add_instances();
    out->set_engine(info.engine);
    out->set_kind(info.kind);
    out->set_scratch_bytes(info.memory_bytes);
    out->set_reason(info.reason);
    for (const auto& p : info.layers) {
      v1::LayerPlacement* l = out->add_layers();
      l->set_layer(p.layer);
      l->set_engine(p.engine);
      // The GPU engine gives a reason per layer (cuDNN, its own kernel, or why the CPU runs it)
      // and leaves it empty where the instance's reason says it ("GPU 0 (cuDNN)"); the CPU
      // engine's is the kernel and weights of each layer. Why the instance runs on the CPU at
      // all is said once, in the instance's reason.
      l->set_reason(p.reason.empty() ? info.reason : p.reason);
    }
  }
  return grpc::Status::OK;
}

namespace {

void FillStatus(const ModelState& state, v1::ModelStatus* m) {
  m->set_name(state.name);
  for (int64_t v : state.versions) m->add_versions(v);
  m->set_state(ModelAvailabilityName(state.state));
  m->set_platform(state.platform);
  m->set_reason(state.reason);
}

}  // namespace

grpc::Status RnnServeService::ListModels(grpc::ServerContext* context, const v1::ListModelsRequest*,
                                         v1::ListModelsResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  for (const ModelState& state : repository_->List()) FillStatus(state, response->add_models());
  return grpc::Status::OK;
}

grpc::Status RnnServeService::LoadModel(grpc::ServerContext* context,
                                        const v1::LoadModelRequest* request,
                                        v1::LoadModelResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  auto state = repository_->Load(request->name());
  if (!state.ok()) return ToGrpc(state.status());
  FillStatus(*state, response->mutable_status());
  return grpc::Status::OK;
}

grpc::Status RnnServeService::UnloadModel(grpc::ServerContext* context,
                                          const v1::UnloadModelRequest* request,
                                          v1::UnloadModelResponse*) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  return ToGrpc(repository_->Unload(request->name()));
}

grpc::Status RnnServeService::ServerMetadata(grpc::ServerContext* context,
                                             const v1::ServerMetadataRequest*,
                                             v1::ServerMetadataResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  response->set_name("rnnserve");
  response->set_version(RNNSERVE_VERSION);
  for (const char* e : {"evaluate", "model_repository", "health", "reflection"}) {
    response->add_extensions(e);
  }
  std::string why;
  response->set_gpu_available(engine::CudaAvailable(&why));
  response->set_gpu_reason(why);
  response->set_model_repository(repository_->root());
  return grpc::Status::OK;
}

}  // namespace rnnserve::server
