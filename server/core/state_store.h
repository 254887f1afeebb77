#pragma once

// Where stateful sequences keep their recurrent states between chunks: one interface for every
// front end's sequences (rnnserve.v1 StreamPredict, KServe sequence_id), run through one
// order by RunChunk (sequence_runner.h). In-process by default (server/sequence_manager.h); a
// store backed by an external service sits behind the same interface: a sequence is named by
// (model, id), owned by a caller, and handed to one chunk at a time with its states and its
// position (the steps its chunks carried so far). The Redis store (server/store/redis_store.h)
// is the shared one, for several replicas.
//
// CONTRACT
//  - Acquire() takes the sequence for one chunk: its states (empty at a start: zeros), its
//    position and the version it runs on. A start creates it (ALREADY_EXISTS when live); a
//    chunk without start needs it live (INVALID_ARGUMENT); another owner's chunk is told the
//    same as for an id that is not live (a live id does not show to other callers), another
//    owner's start ALREADY_EXISTS ("is in use"); a second chunk while one holds it is ABORTED; over
//    a bound, RESOURCE_EXHAUSTED naming it. Nothing changes when Acquire fails.
//  - Release() ends the chunk: it puts the new states and adds the chunk's steps, or erases the
//    sequence when the chunk ended it (`end`) or failed (`failed`). Every successful Acquire is
//    followed by exactly one Release. A store that cannot keep the new states (a shared store
//    that is unreachable, or whose sequence another replica advanced meanwhile) returns the
//    error, and the chunk fails with it: its answer is never given for states that were lost.
//    The in-process store always returns OK.
//  - EndOwner() erases every sequence an owner holds that no chunk holds (a closed stream), and
//    returns how many.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/tensor.h"

namespace rnnserve::server {

class Servable;

// Recurrent states by layer name, in the order of the layer's state outputs.
using LayerStates = std::map<std::string, std::vector<engine::Tensor>>;

namespace core {

class StateStore {
 public:
  // Who sends a chunk. `owner` is what a sequence belongs to (a stream, or a caller identity);
  // `client` is what the per-client quota counts (the caller identity: a hash of its token, or
  // its peer address). Neither is ever a token itself.
  struct Caller {
    std::string owner;
    std::string client;
  };
  // A model's limits (config.pbtxt sequence_batching; SequenceLimitsOf fills the defaults).
  struct Limits {
    absl::Duration max_idle = absl::Seconds(60);  // must be positive
    int max_sequences = 1024;                     // must be positive
  };
  struct Lease {
    std::shared_ptr<const Servable> servable;  // the version this sequence runs on
    LayerStates states;                        // empty at start: zeros
    int64_t steps = 0;                         // time steps the earlier chunks carried
  };

  virtual ~StateStore() = default;
  // `servable` is what a start binds the sequence to.
  virtual absl::StatusOr<Lease> Acquire(const std::string& model, uint64_t id, bool start,
                                        std::shared_ptr<const Servable> servable,
                                        const Limits& limits, const Caller& caller) = 0;
  virtual absl::Status Release(const std::string& model, uint64_t id, LayerStates states, bool end,
                               bool failed, int64_t steps_added = 0) = 0;
  virtual int EndOwner(const std::string& owner) = 0;
};

}  // namespace core
}  // namespace rnnserve::server
