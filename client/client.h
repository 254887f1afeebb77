#pragma once

// A small C++ client of the rnnserve.v1 API: numpy-like arrays in, arrays out.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/npy.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"

namespace rnnserve::client {

// The gRPC metadata header that carries a call's sequence id, where a proxy in front of several
// replicas can hash it to keep a sequence on one replica (docs/scale-out.md). Sent on every
// call that names a sequence; the request's own sequence id stays the source of truth.
inline constexpr std::string_view kSequenceIdHeader = "x-sequence-id";

struct ClientOptions {
  std::string server = "127.0.0.1:8500";
  int64_t timeout_ms = 30000;
  int max_message_bytes = 64 << 20;
  // TLS, as PEM text (ReadConnectionFiles fills these from files). Plaintext when all three
  // are empty; root certificates alone: TLS that checks the server against them; with a
  // certificate and key: mutual TLS.
  std::string tls_root_certs;
  std::string tls_cert_chain;
  std::string tls_private_key;
  // Sent as `authorization: Bearer <token>` on every call when not empty.
  std::string token;
};

// Fills the TLS fields and the token of *options from files (empty paths are skipped); the
// token file's first non-blank line is the token. INVALID_ARGUMENT naming the flag of a file
// that cannot be read.
absl::Status ReadConnectionFiles(const std::string& tls_ca, const std::string& tls_cert,
                                 const std::string& tls_key, const std::string& token_file,
                                 ClientOptions* options);

// The channel credentials `options` ask for.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ClientOptions& options);
// A context with the options' deadline and token.
std::unique_ptr<grpc::ClientContext> NewContext(const ClientOptions& options);

class RnnServeClient {
 public:
  explicit RnnServeClient(const ClientOptions& options);

  absl::StatusOr<v1::ModelMetadataResponse> Metadata(const std::string& model, int64_t version = 0);
  absl::StatusOr<v1::ListModelsResponse> List();
  // Arrays keyed by input name; the dtype of each input comes from the model's metadata.
  // An array under the key "" goes to the model's only input. A name the model lacks is
  // INVALID_ARGUMENT naming it and the model's inputs.
  absl::StatusOr<v1::PredictResponse> Predict(const std::string& model,
                                              const std::map<std::string, NpyArray>& inputs,
                                              const std::vector<int32_t>& lengths,
                                              int64_t version = 0);

  struct EvaluateOptions {
    std::string loss;                  // empty: the model's own
    std::vector<std::string> metrics;  // empty: the model's own
    const NpyArray* sample_weight = nullptr;
    std::vector<int32_t> lengths;
    int64_t batch_size = 0;  // > 0: EvaluateStream in chunks of this many sequences
  };
  absl::StatusOr<v1::EvaluateResponse> Evaluate(const std::string& model,
                                                const std::map<std::string, NpyArray>& inputs,
                                                const std::map<std::string, NpyArray>& targets,
                                                const EvaluateOptions& options);

  // Streams every sequence of a single-input [B, T, ...] array as its own stateful sequence
  // (ids first_id, first_id + 1, ...) in chunks of chunk_steps steps, up to each one's length;
  // calls on_chunk with each answer.
  absl::Status StreamSequences(
      const std::string& model, const NpyArray& input, int64_t chunk_steps,
      const std::vector<int32_t>& lengths, uint64_t first_id,
      const std::function<void(int64_t sequence, int64_t end_step,
                               const v1::StreamPredictResponse&)>& on_chunk);

  // Generate: calls on_step with each step's tokens and finishes as the server streams them;
  // on_step returning false cancels the call (the status is then OK).
  absl::Status Generate(const v1::GenerateRequest& request,
                        const std::function<bool(const v1::GenerateResponse&)>& on_step);

  absl::StatusOr<v1::LoadModelResponse> Load(const std::string& model);
  absl::Status Unload(const std::string& model);
  absl::StatusOr<v1::ServerMetadataResponse> ServerMetadata();

 private:
  // Converts arrays to request tensors, named and typed after the model's inputs.
  absl::Status FillInputs(const std::string& model, const v1::ModelMetadataResponse& meta,
                          const std::map<std::string, NpyArray>& inputs,
                          google::protobuf::Map<std::string, v1::Tensor>* out);
  std::unique_ptr<grpc::ClientContext> Context() const;
  const ClientOptions options_;
  std::unique_ptr<v1::RnnServe::Stub> stub_;
};

// Converts a response tensor to an array (float32 -> "<f4", int64 -> "<i8").
NpyArray ToArray(const v1::Tensor& tensor);

// Rows [begin, end) of an array as a tensor: int64 when `integer`, else float32.
absl::StatusOr<v1::Tensor> ToTensor(const NpyArray& array, bool integer, int64_t begin = 0,
                                    int64_t end = -1);

}  // namespace rnnserve::client
