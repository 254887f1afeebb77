#include "client/client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rnnserve::client {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

absl::Status ReadConnectionFiles(const std::string& tls_ca, const std::string& tls_cert,
                                 const std::string& tls_key, const std::string& token_file,
                                 ClientOptions* options) {
  const std::pair<const std::string*, std::string*> pem[] = {{&tls_ca, &options->tls_root_certs},
                                                             {&tls_cert, &options->tls_cert_chain},
                                                             {&tls_key, &options->tls_private_key}};
  const char* flags[] = {"--tls-ca", "--tls-cert", "--tls-key"};
  for (int i = 0; i < 3; ++i) {
    if (pem[i].first->empty()) continue;
    auto text = ReadFile(*pem[i].first, flags[i]);
    if (!text.ok()) return text.status();
    *pem[i].second = *std::move(text);
  }
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!token_file.empty()) {
    auto text = ReadFile(token_file, "--token-file");
    if (!text.ok()) return text.status();
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty()) {
        options->token = std::string(line);
        break;
      }
    }
    if (options->token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token-file: ", token_file, " is empty"));
    }
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ClientOptions& options) {
  if (options.tls_root_certs.empty() && options.tls_cert_chain.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.tls_root_certs;  // empty: the system's roots
  ssl.pem_cert_chain = options.tls_cert_chain;
  ssl.pem_private_key = options.tls_private_key;
  return grpc::SslCredentials(ssl);
}

std::unique_ptr<grpc::ClientContext> NewContext(const ClientOptions& options) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(options.timeout_ms));
  if (!options.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options.token);
  return ctx;
}

RnnServeClient::RnnServeClient(const ClientOptions& options) : options_(options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  stub_ = v1::RnnServe::NewStub(
      grpc::CreateCustomChannel(options.server, ChannelCredentials(options), args));
}

std::unique_ptr<grpc::ClientContext> RnnServeClient::Context() const {
  return NewContext(options_);
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

absl::Status RnnServeClient::FillInputs(const std::string& model,
                                        const v1::ModelMetadataResponse& meta,
                                        const std::map<std::string, NpyArray>& inputs,
                                        google::protobuf::Map<std::string, v1::Tensor>* out) {
  for (const auto& [given_name, array] : inputs) {
    std::string name = given_name;
    const v1::TensorInfo* info = nullptr;
    if (name.empty()) {
      if (meta.inputs_size() != 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("model '", model, "' has ", meta.inputs_size(),
                         " inputs: name each one (--input NAME=FILE)"));
      }
      info = &meta.inputs(0);
      name = info->name();
    } else {
      for (const auto& in : meta.inputs()) {
        if (in.name() == name) info = &in;
      }
      if (info == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model '", model, "' has no input '", name, "'; its inputs: ",
            absl::StrJoin(meta.inputs(), ", ", [](std::string* out, const v1::TensorInfo& in) {
              out->append(in.name());
            })));
      }
    }
    auto t = ToTensor(array, info->dtype() == v1::TYPE_INT64);
    if (!t.ok()) {
      return absl::Status(t.status().code(),
                          absl::StrCat("input '", name, "': ", t.status().message()));
    }
    (*out)[name] = std::move(*t);
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::PredictResponse> RnnServeClient::Predict(
    const std::string& model, const std::map<std::string, NpyArray>& inputs,
    const std::vector<int32_t>& lengths, int64_t version) {
  auto meta = Metadata(model, version);
  if (!meta.ok()) return meta.status();
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name(model);
  req.mutable_model_spec()->set_version(version);
  if (auto s = FillInputs(model, *meta, inputs, req.mutable_inputs()); !s.ok()) return s;
  for (int32_t len : lengths) req.add_lengths(len);
  v1::PredictResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->Predict(ctx.get(), req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::EvaluateResponse> RnnServeClient::Evaluate(
    const std::string& model, const std::map<std::string, NpyArray>& inputs,
    const std::map<std::string, NpyArray>& targets, const EvaluateOptions& options) {
  auto meta = Metadata(model);
  if (!meta.ok()) return meta.status();
  if (inputs.empty() || targets.empty()) {
    return absl::InvalidArgumentError("evaluate needs inputs and targets");
  }
  const int64_t B = inputs.begin()->second.shape.empty() ? 0 : inputs.begin()->second.shape[0];
  const int64_t step = options.batch_size > 0 ? options.batch_size : B;
  std::vector<v1::EvaluateRequest> chunks;
  for (int64_t begin = 0; begin < B; begin += step) {
    const int64_t end = std::min(B, begin + step);
    v1::EvaluateRequest req;
    req.mutable_model_spec()->set_name(model);
    req.set_loss(options.loss);
    for (const auto& m : options.metrics) req.add_metrics(m);
    std::map<std::string, NpyArray> part;
    for (const auto& [name, a] : inputs) {
      auto t = ToTensor(a, false, begin, end);
      if (!t.ok()) return t.status();
      part[name] = ToArray(*t);
    }
    if (auto s = FillInputs(model, *meta, part, req.mutable_inputs()); !s.ok()) return s;
    for (const auto& [name, a] : targets) {
      const std::string key =
          name.empty() && meta->outputs_size() > 0 ? meta->outputs(0).name() : name;
      auto t = ToTensor(a, a.is_integer(), begin, end);
      if (!t.ok()) return t.status();
      (*req.mutable_targets())[key] = std::move(*t);
    }
    if (options.sample_weight) {
      auto t = ToTensor(*options.sample_weight, false, begin, end);
      if (!t.ok()) return t.status();
      *req.mutable_sample_weight() = std::move(*t);
    }
    for (int64_t i = begin; i < end && i < static_cast<int64_t>(options.lengths.size()); ++i) {
      req.add_lengths(options.lengths[i]);
    }
    chunks.push_back(std::move(req));
  }
  v1::EvaluateResponse resp;
  auto ctx = Context();
  if (chunks.size() == 1) {
    if (auto s = FromGrpc(stub_->Evaluate(ctx.get(), chunks[0], &resp)); !s.ok()) return s;
    return resp;
  }
  auto writer = stub_->EvaluateStream(ctx.get(), &resp);
  for (const auto& c : chunks) {
    if (!writer->Write(c)) break;
  }
  writer->WritesDone();
  if (auto s = FromGrpc(writer->Finish()); !s.ok()) return s;
  return resp;
}

absl::Status RnnServeClient::Generate(
    const v1::GenerateRequest& request,
    const std::function<bool(const v1::GenerateResponse&)>& on_step) {
  auto ctx = Context();
  auto reader = stub_->Generate(ctx.get(), request);
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (!on_step(resp)) {
      ctx->TryCancel();
      (void)reader->Finish();
      return absl::OkStatus();
    }
  }
  return FromGrpc(reader->Finish());
}

absl::Status RnnServeClient::StreamSequences(
    const std::string& model, const NpyArray& input, int64_t chunk_steps,
    const std::vector<int32_t>& lengths, uint64_t first_id,
    const std::function<void(int64_t, int64_t, const v1::StreamPredictResponse&)>& on_chunk) {
  auto meta = Metadata(model);
  if (!meta.ok()) return meta.status();
  if (meta->inputs_size() != 1) {
    return absl::InvalidArgumentError("stream takes single-input models");
  }
  if (input.shape.size() < 2 || chunk_steps <= 0) {
    return absl::InvalidArgumentError("stream needs a [B, T, ...] input and --chunk-steps > 0");
  }
  const bool integer = meta->inputs(0).dtype() == v1::TYPE_INT64;
  const int64_t B = input.shape[0], T = input.shape[1];
  const int64_t step_size = static_cast<int64_t>(input.values.size()) / (B * T);
  auto ctx = Context();
  // The sequence id where a proxy can hash it (x-sequence-id, docs/scale-out.md): the stream
  // carries sequences first_id.., and goes where the first one does.
  ctx->AddMetadata(std::string(kSequenceIdHeader), std::to_string(first_id));
  auto stream = stub_->StreamPredict(ctx.get());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = b < static_cast<int64_t>(lengths.size()) ? lengths[b] : T;
    for (int64_t t0 = 0; t0 < len; t0 += chunk_steps) {
      const int64_t t1 = std::min(len, t0 + chunk_steps);
      NpyArray chunk;
      chunk.descr = input.descr;
      chunk.shape = input.shape;
      chunk.shape[0] = 1;
      chunk.shape[1] = t1 - t0;
      chunk.values.assign(input.values.begin() + (b * T + t0) * step_size,
                          input.values.begin() + (b * T + t1) * step_size);
      v1::StreamPredictRequest req;
      req.mutable_model_spec()->set_name(model);
      req.set_sequence_id(first_id + b);
      req.set_start(t0 == 0);
      req.set_end(t1 == len);
      auto t = ToTensor(chunk, integer);
      if (!t.ok()) return t.status();
      (*req.mutable_inputs())[meta->inputs(0).name()] = std::move(*t);
      v1::StreamPredictResponse resp;
      if (!stream->Write(req) || !stream->Read(&resp)) return FromGrpc(stream->Finish());
      if (resp.error_code() != 0) {
        return absl::Status(
            static_cast<absl::StatusCode>(resp.error_code()),
            absl::StrCat("sequence ", b, " steps [", t0, ", ", t1, "): ", resp.error_message()));
      }
      on_chunk(b, t1, resp);
    }
  }
  stream->WritesDone();
  return FromGrpc(stream->Finish());
}

absl::StatusOr<v1::LoadModelResponse> RnnServeClient::Load(const std::string& model) {
  v1::LoadModelRequest req;
  req.set_name(model);
  v1::LoadModelResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->LoadModel(ctx.get(), req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status RnnServeClient::Unload(const std::string& model) {
  v1::UnloadModelRequest req;
  req.set_name(model);
  v1::UnloadModelResponse resp;
  auto ctx = Context();
  return FromGrpc(stub_->UnloadModel(ctx.get(), req, &resp));
}

absl::StatusOr<v1::ServerMetadataResponse> RnnServeClient::ServerMetadata() {
  v1::ServerMetadataResponse resp;
  auto ctx = Context();
  if (auto s = FromGrpc(stub_->ServerMetadata(ctx.get(), {}, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<v1::Tensor> ToTensor(const NpyArray& array, bool integer, int64_t begin,
                                    int64_t end) {
  v1::Tensor t;
  if (array.shape.empty()) return absl::InvalidArgumentError("a scalar is not a batch");
  if (end < 0) end = array.shape[0];
  const int64_t row =
      array.shape[0] ? static_cast<int64_t>(array.values.size()) / array.shape[0] : 0;
  t.add_shape(end - begin);
  for (size_t d = 1; d < array.shape.size(); ++d) t.add_shape(array.shape[d]);
  if (integer) {
    t.set_dtype(v1::TYPE_INT64);
    for (int64_t i = begin * row; i < end * row; ++i) {
      const double v = array.values[i];
      if (v != std::floor(v)) {
        return absl::InvalidArgumentError(absl::StrCat("takes integer token ids; got ", v));
      }
      t.add_int64_val(static_cast<int64_t>(v));
    }
  } else {
    t.set_dtype(v1::TYPE_FP32);
    for (int64_t i = begin * row; i < end * row; ++i)
      t.add_float_val(static_cast<float>(array.values[i]));
  }
  return t;
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
