#include "client/client.h"

#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::client {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

RnnServeClient::RnnServeClient(const ClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  stub_ = v1::RnnServe::NewStub(
      grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> RnnServeClient::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(options_.timeout_ms));
  return ctx;
}

absl::StatusOr<v1::ModelMetadataResponse> RnnServeClient::Metadata(const std::string& model,
                                                                   int64_t version) {
  v1::ModelMetadataRequest req;
  req.mutable_model_spec()->set_name(model);
  req.mutable_model_spec()->set_version(version);
  v1::ModelMetadataResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->ModelMetadata(ctx.get(), req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::ListModelsResponse> RnnServeClient::List() {
  v1::ListModelsResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->ListModels(ctx.get(), {}, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::PredictResponse> RnnServeClient::Predict(
    const std::string& model, const std::map<std::string, NpyArray>& inputs,
    const std::vector<int32_t>& lengths, int64_t version) {
  auto meta = Metadata(model, version);
  if (!meta.ok()) return meta.status();
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name(model);
  req.mutable_model_spec()->set_version(version);
  for (const auto& [given_name, array] : inputs) {
    std::string name = given_name;
    const v1::TensorInfo* info = nullptr;
    if (name.empty()) {
      if (meta->inputs_size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model '", model, "' has ", meta->inputs_size(),
            " inputs: name each one (--input NAME=FILE)"));
      }
      info = &meta->inputs(0);
      name = info->name();
    } else {
      for (const auto& in : meta->inputs()) {
        if (in.name() == name) info = &in;
      }
    }
    v1::Tensor& t = (*req.mutable_inputs())[name];
    for (int64_t d : array.shape) t.add_shape(d);
    if (info && info->dtype() == v1::TYPE_INT64) {
      t.set_dtype(v1::TYPE_INT64);
      for (double v : array.values) {
        if (v != std::floor(v)) {
          return absl::InvalidArgumentError(
              absl::StrCat("input '", name, "' takes integer token ids; got ", v));
        }
        t.add_int64_val(static_cast<int64_t>(v));
      }
    } else {
      t.set_dtype(v1::TYPE_FP32);
      for (double v : array.values) t.add_float_val(static_cast<float>(v));
    }
  }
  for (int32_t len : lengths) req.add_lengths(len);
  v1::PredictResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->Predict(ctx.get(), req, &resp)); !s.ok()) return s;
  return resp;
}

NpyArray ToArray(const v1::Tensor& tensor) {
  NpyArray a;
  a.shape.assign(tensor.shape().begin(), tensor.shape().end());
  if (tensor.dtype() == v1::TYPE_INT64 || tensor.dtype() == v1::TYPE_INT32) {
    a.descr = "<i8";
    for (int64_t v : tensor.int64_val()) a.values.push_back(static_cast<double>(v));
    for (int32_t v : tensor.int_val()) a.values.push_back(v);
  } else {
    a.descr = "<f4";
    a.values.assign(tensor.float_val().begin(), tensor.float_val().end());
  }
  return a;
}

}  // namespace rnnserve::client
