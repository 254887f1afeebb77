#pragma once

// Sequence identity on the KServe v2 protocol: the request parameters sequence_id (int64,
// uint64 or string), sequence_start and sequence_end (bool), as Triton's clients and
// perf_analyzer send them. The service parses them here and runs the chunk through the one
// sequence runner (server/core/sequence_runner.h) over its state store, which keeps the state
// (h, c per layer) between chunks. Without a store a sequence request fails with
// UNIMPLEMENTED: chunks never run as independent requests.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/grpc_service.pb.h"

namespace rnnserve::server::kserve {

struct SequenceIdentity {
  // Exactly one of id (non-zero) and string_id (non-empty) is set.
  uint64_t id = 0;
  std::string string_id;
  bool start = false;  // the first chunk: state starts from zero
  bool end = false;    // the last chunk: state is released after it
  std::string ToString() const;
};

using InferParameters = google::protobuf::Map<std::string, inference::InferParameter>;

// nullopt when the request names no sequence (no sequence_id, or sequence_id 0 / "" without
// start or end, which Triton's clients send for "no sequence"). INVALID_ARGUMENT for a
// parameter of the wrong type, or start/end without an id.
absl::StatusOr<std::optional<SequenceIdentity>> ParseSequence(const InferParameters& parameters);

}  // namespace rnnserve::server::kserve
