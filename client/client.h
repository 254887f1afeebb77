#pragma once

// A small C++ client of the rnnserve.v1 API: numpy-like arrays in, arrays out.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "client/npy.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"

namespace rnnserve::client {

struct ClientOptions {
  std::string server = "127.0.0.1:8500";
  int64_t timeout_ms = 30000;
  int max_message_bytes = 64 << 20;
};

class RnnServeClient {
 public:
  explicit RnnServeClient(const ClientOptions& options);

  absl::StatusOr<v1::ModelMetadataResponse> Metadata(const std::string& model, int64_t version = 0);
  absl::StatusOr<v1::ListModelsResponse> List();
  // Arrays keyed by input name; the dtype of each input comes from the model's metadata.
  // An array under the key "" goes to the model's only input.
  absl::StatusOr<v1::PredictResponse> Predict(const std::string& model,
                                              const std::map<std::string, NpyArray>& inputs,
                                              const std::vector<int32_t>& lengths,
                                              int64_t version = 0);

 private:
  std::unique_ptr<grpc::ClientContext> Context() const;
  const ClientOptions options_;
  std::unique_ptr<v1::RnnServe::Stub> stub_;
};

// Converts a response tensor to an array (float32 -> "<f4", int64 -> "<i8").
NpyArray ToArray(const v1::Tensor& tensor);

}  // namespace rnnserve::client
