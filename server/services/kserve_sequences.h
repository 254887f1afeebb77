#pragma once

// KServe v2 sequence requests (sequence_id / sequence_start / sequence_end parameters) run on
// the same server-held state as rnnserve.v1 StreamPredict (server/sequence_manager.h).

#include "server/sequence_manager.h"
#include "server/services/kserve/sequence.h"

namespace rnnserve::server {

class ManagedSequences final : public kserve::SequenceHandler {
 public:
  // `manager` is not owned and must outlive this handler.
  explicit ManagedSequences(SequenceManager* manager) : manager_(manager) {}
  absl::Status Run(const Servable& servable, const kserve::SequenceIdentity& sequence,
                   const engine::Batch& batch, std::vector<engine::Tensor>* outputs,
                   const RunOptions& options, std::shared_ptr<const Servable>* ran_on) override;

 private:
  SequenceManager* const manager_;
};

}  // namespace rnnserve::server
