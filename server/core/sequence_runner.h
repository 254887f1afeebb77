#pragma once

// One chunk of a stateful sequence, the same way for every front end (rnnserve.v1
// StreamPredict, KServe sequence_id): admit, own, run, release.
//
//  1. admit (the front end, before RunChunk): the model the request names, the process's limits
//     (server/limits/admission.h), and the one validation against the model's stream signature
//     (stream_window.h: time axes free) give a batch of one sequence;
//  2. own: the state store hands the sequence over (its states, its position, the version it
//     started on), or refuses it (state_store.h says when), and nothing changes;
//  3. run: the chunk must fit the model's window (stream_window.h; if not, INVALID_ARGUMENT and
//     the sequence stays as it was, for a corrected retry), then runs on the sequence's version
//     from its states (`continues` unless it starts);
//  4. release: the final states go back to the store with the chunk's steps, or the sequence is
//     dropped when the chunk ended it or failed. A store that could not keep them fails the
//     chunk with its error (a shared store: UNAVAILABLE, ABORTED), and the outputs are not
//     answered.

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "server/core/request.h"
#include "server/core/state_store.h"

namespace rnnserve::server {

class Servable;

namespace core {

struct Chunk {
  uint64_t id = 0;
  bool start = false;
  bool end = false;
  StateStore::Caller caller;
  // The version the request resolved to: a start binds the sequence to it.
  std::shared_ptr<const Servable> servable;
};

// Steps 2 to 4 for an admitted `batch`. *ran_on: the sequence's version, set once the
// sequence is owned (the response names it), whether or not the chunk then ran.
absl::Status RunChunk(StateStore& store, const Chunk& chunk, engine::Batch batch,
                      const RunOptions& options, std::vector<engine::Tensor>* outputs,
                      std::shared_ptr<const Servable>* ran_on);

}  // namespace core
}  // namespace rnnserve::server
