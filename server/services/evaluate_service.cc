// Evaluate and EvaluateStream of the rnnserve.v1 service: loss and metrics as Keras's
// model.evaluate returns them.

#include <algorithm>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/evaluate/accumulator.h"
#include "server/evaluate/keras_logits.h"
#include "server/grpc_status.h"
#include "server/limits/caller_identity.h"
#include "server/services/rnnserve_service.h"
#include "server/tensor_codec.h"

namespace rnnserve::server {
namespace {

using evaluate::Accumulator;

std::vector<float> Floats(const engine::Tensor& t) {
  if (t.dtype() == engine::DType::kFloat32) return {t.f32(), t.f32() + t.num_elements()};
  std::vector<float> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = static_cast<float>(t.i64()[i]);
  return v;
}

// The loss the request names, or the one the file's training config records.
absl::StatusOr<evaluate::LossSpec> MakeLoss(const v1::EvaluateRequest& req, const Servable& model) {
  const auto& training = model.training_config();
  std::string loss_name = req.loss();
  bool from_logits = req.from_logits();
  double delta = 1.0;
  if (loss_name.empty()) {
    if (!training || training->loss.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", model.name(),
                       "' records no loss (not compiled when saved); name one in "
                       "the request's loss field"));
    }
    loss_name = training->loss;
    from_logits = training->from_logits;
    delta = training->huber_delta;
  }
  auto loss = evaluate::MakeLoss(models::CanonicalLossName(loss_name), from_logits, delta);
  if (!loss.ok()) return loss.status();
  loss->keras_major = std::max(loss->keras_major, evaluate::KerasMajor(model.ir()));
  return loss;
}

// Builds the accumulator from the loss, the request's metrics (or the file's training
// config's) and the first chunk's shapes.
absl::StatusOr<std::unique_ptr<Accumulator>> MakeAccumulator(const v1::EvaluateRequest& req,
                                                             const Servable& model,
                                                             evaluate::LossSpec loss,
                                                             const engine::Shape& y_true,
                                                             const engine::Shape& y_pred) {
  const auto& training = model.training_config();
  std::vector<models::MetricConfig> wanted;
  if (req.metrics_size() > 0 || req.weighted_metrics_size() > 0) {
    for (const auto& m : req.metrics()) wanted.push_back({m, "", false});
    for (const auto& m : req.weighted_metrics()) wanted.push_back({m, "", true});
  } else if (training) {
    wanted = training->metrics;
  }
  std::vector<evaluate::MetricSpec> metrics;
  const int64_t t_last = y_true.empty() ? 1 : y_true.back();
  for (const auto& m : wanted) {
    auto spec = evaluate::ResolveMetric(m.name, m.fn, m.weighted, y_true.size(), t_last,
                                        y_pred.size(), y_pred.empty() ? 1 : y_pred.back());
    if (!spec.ok()) return spec.status();
    metrics.push_back(*spec);
  }
  return std::make_unique<Accumulator>(std::move(loss), std::move(metrics));
}

// Runs one chunk through the model and adds it to *acc (created from the first chunk), admitted
// under the limits as a Predict is (limits/admission.h): the chunk's bytes, its decoded batch
// and targets, and the engine's working memory for it, held until the chunk is done.
absl::Status EvaluateChunk(const v1::EvaluateRequest& req, const Servable& model,
                           const limits::RequestLimits& limits, const std::string& caller,
                           const RunOptions& options, std::unique_ptr<Accumulator>* acc) {
  auto admission = limits::Admit(limits, model, caller, static_cast<int64_t>(req.ByteSizeLong()));
  if (!admission.ok()) return admission.status();
  const core::Request request{.inputs = ViewsOf(req.inputs()),
                              .lengths = {req.lengths().begin(), req.lengths().end()}};
  auto batch = core::Validate(request, model.signature());
  if (!batch.ok()) return batch.status();
  if (auto s = admission->AddBatch(*batch); !s.ok()) return s;
  if (req.targets().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("targets: none given (model outputs: ", model.outputs()[0].name, ", ...)"));
  }
  if (req.targets_size() > 1) {
    return absl::UnimplementedError("Evaluate takes targets for one output");
  }
  const auto& [target_name, target_proto] = *req.targets().begin();
  int output = -1;
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    if (model.outputs()[i].name == target_name) output = static_cast<int>(i);
  }
  if (output < 0 && model.outputs().size() == 1) output = 0;
  if (output < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "targets: '", target_name, "' is not an output of model '", model.name(), "'"));
  }
  auto y_true = DecodeTensor(target_proto, absl::StrCat("targets '", target_name, "'"));
  if (!y_true.ok()) return y_true.status();
  // The targets decoded, and their copy as floats (Floats below).
  if (auto s = admission->bytes.Add(2 * 4 * y_true->num_elements()); !s.ok()) return s;
  std::vector<float> weights;
  if (req.has_sample_weight()) {
    auto w = DecodeTensor(req.sample_weight(), "sample_weight");
    if (!w.ok()) return w.status();
    weights = Floats(*w);
    for (float v : weights) {
      if (!(v >= 0) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat("sample_weight: ", v, " is not a finite non-negative weight"));
      }
    }
  }
  absl::StatusOr<evaluate::LossSpec> loss =
      *acc ? absl::StatusOr<evaluate::LossSpec>((*acc)->loss_spec()) : MakeLoss(req, model);
  if (!loss.ok()) return loss.status();
  // A cross-entropy loss on an output that a softmax or sigmoid produced is computed from that
  // activation's logits, which the model then returns as one more output, last.
  const bool with_logits = loss->cross_entropy() && model.HasOutputLogits(output);
  std::vector<engine::Tensor> outputs;
  const absl::Status ran = with_logits
                               ? model.RunWithLogits(output, *std::move(batch), &outputs, options)
                               : model.Run(*std::move(batch), &outputs, options);
  if (!ran.ok()) return ran;
  const engine::Tensor& y_pred = outputs[output];
  if (!*acc) {
    auto made = MakeAccumulator(req, model, *loss, y_true->shape(), y_pred.shape());
    if (!made.ok()) return made.status();
    *acc = std::move(*made);
  }
  return (*acc)->Add(y_pred, with_logits ? &outputs.back() : nullptr, y_true->shape(),
                     Floats(*y_true), weights, target_name);
}

void Fill(const Servable& model, const Accumulator& acc, v1::EvaluateResponse* response) {
  response->mutable_model_spec()->set_name(model.name());
  response->mutable_model_spec()->set_version(model.version());
  response->set_loss(acc.loss());
  response->set_loss_name(acc.loss_spec().name);
  response->set_samples(acc.samples());
  for (const auto& [name, value] : acc.metrics()) (*response->mutable_metrics())[name] = value;
}

}  // namespace

grpc::Status RnnServeService::Evaluate(grpc::ServerContext* context,
                                       const v1::EvaluateRequest* request,
                                       v1::EvaluateResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  auto servable = repository_->Get(request->model_spec().name(), request->model_spec().version());
  if (!servable.ok()) return ToGrpc(servable.status());
  std::unique_ptr<Accumulator> acc;
  if (auto s = EvaluateChunk(*request, **servable, limits_.requests,
                             limits::CallerIdentity(*context), RunOptionsFor(*context), &acc);
      !s.ok()) {
    return ToGrpc(s);
  }
  Fill(**servable, *acc, response);
  return grpc::Status::OK;
}

grpc::Status RnnServeService::EvaluateStream(grpc::ServerContext* context,
                                             grpc::ServerReader<v1::EvaluateRequest>* reader,
                                             v1::EvaluateResponse* response) {
  if (grpc::Status a = auth::Verdict(*context); !a.ok()) {
    return a;
  }
  v1::EvaluateRequest chunk;
  std::shared_ptr<const Servable> model;
  std::unique_ptr<Accumulator> acc;
  int index = 0;
  const std::string caller = limits::CallerIdentity(*context);
  while (reader->Read(&chunk)) {
    if (!model) {
      auto servable = repository_->Get(chunk.model_spec().name(), chunk.model_spec().version());
      if (!servable.ok()) return ToGrpc(servable.status());
      model = *servable;  // every chunk uses the version the first one got
    }
    if (auto s =
            EvaluateChunk(chunk, *model, limits_.requests, caller, RunOptionsFor(*context), &acc);
        !s.ok()) {
      return ToGrpc(absl::Status(s.code(), absl::StrCat("chunk ", index, ": ", s.message())));
    }
    ++index;
  }
  if (!acc) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "EvaluateStream: no chunks");
  Fill(*model, *acc, response);
  return grpc::Status::OK;
}

}  // namespace rnnserve::server
