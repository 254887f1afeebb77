#pragma once

// Sequence identity on the KServe v2 protocol: the request parameters sequence_id (int64,
// uint64 or string), sequence_start and sequence_end (bool), as Triton's clients and
// perf_analyzer send them. The service parses them here and hands the identity to a
// SequenceHandler, which keeps the state (h, c per layer) between chunks. Without a handler
// a sequence request fails with UNIMPLEMENTED: chunks never run as independent requests.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "inference/grpc_service.pb.h"
#include "server/servable.h"

namespace rnnserve::server::kserve {

struct SequenceIdentity {
  // Exactly one of id (non-zero) and string_id (non-empty) is set.
  uint64_t id = 0;
  std::string string_id;
  bool start = false;  // the first chunk: state starts from zero
  bool end = false;    // the last chunk: state is released after it
  // Who sent it (server/limits/caller_identity.h), set by the service, not parsed: a sequence
  // belongs to the caller that started it.
  std::string caller;
  std::string ToString() const;
};

using InferParameters = google::protobuf::Map<std::string, inference::InferParameter>;

// nullopt when the request names no sequence (no sequence_id, or sequence_id 0 / "" without
// start or end, which Triton's clients send for "no sequence"). INVALID_ARGUMENT for a
// parameter of the wrong type, or start/end without an id.
absl::StatusOr<std::optional<SequenceIdentity>> ParseSequence(const InferParameters& parameters);

// Runs one chunk of a stateful sequence on server-held state. Implementations are shared by
// every gRPC thread and must be thread-safe.
class SequenceHandler {
 public:
  virtual ~SequenceHandler() = default;
  // `servable`: the model version the request resolved to, which a start binds the sequence
  // to. A sequence runs every chunk on the version it started on, also after a newer version
  // loads; *ran_on is set to that version (the response reports it) whenever the sequence was
  // found, whether or not the chunk then ran.
  virtual absl::Status Run(const Servable& servable, const SequenceIdentity& sequence,
                           const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                           const RunOptions& options, std::shared_ptr<const Servable>* ran_on) = 0;
};

}  // namespace rnnserve::server::kserve
