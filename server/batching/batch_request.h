#pragma once

// What a caller hands to a batch scheduler, and what the scheduler reports about its batches.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "engine/tensor.h"
#include "server/core/request.h"

namespace rnnserve::server::batching {

// One request: B sequences, validated at the edge, and where their answer goes.
struct BatchRequest {
  // Inputs in the model's input order, each [B, T, ...] (or [B, ...]) with B >= 1, and either
  // B lengths in [0, T] (engine/lengths.h) or none (every sequence is T long, or as long as the
  // model's masking says). Initial states and a final_states target (stateful chunks) are honoured
  // per row.
  engine::Batch batch;
  // The request fails with DEADLINE_EXCEEDED, costing no compute, if its rows have not all
  // started by then; running, its work stops at the next step boundary (see `cancelled`).
  absl::Time deadline = absl::InfiniteFuture();
  // 0: the model's default level. Otherwise 1 (served first) .. the model's priority_levels.
  // Levels order a caller's own requests (fair_queue.h): callers take turns whatever their
  // levels.
  int priority = 0;
  // Whose turn it takes in the queue (fair_queue.h): limits::ShareKey of the caller's identity;
  // "" is one caller like any other.
  std::string caller;
  // Whether the caller gave up (its client cancelled, or the server's shutdown cancelled the
  // call); null: never. Asked only before `done` is called. Every scheduler stops the request's
  // work when it says so, or when the deadline passes: a waiting request is answered
  // (CANCELLED, DEADLINE_EXCEEDED) within abandon_watch.h's poll interval, a running one at
  // the next step boundary of its batch (step-level batching: between chunks).
  std::function<bool()> cancelled;
  // With run_on_caller_when_idle: whether the caller of Schedule may run the batch on its own
  // thread. false for a caller that must not block (a gRPC callback handler): a worker runs it.
  bool may_run_on_caller = true;
  // Whether the caller waits for the answer on its own thread (a synchronous run). The direct
  // scheduler then runs the request there even while every instance is busy, waiting for one
  // until the deadline, instead of handing it to a thread of its own.
  bool caller_blocks = false;
  // Where this request's rows of each output go (server/core/request.h); null: tensors of the
  // scheduler's own.
  OutputAllocator allocate_outputs;
  // Called exactly once, outside the scheduler's locks, with one tensor per model output
  // holding exactly this request's B rows in order (time axes cropped back to this request's
  // T), or with why not.
  absl::AnyInvocable<void(absl::StatusOr<std::vector<engine::Tensor>>)> done;
};

// One engine call, as the scheduler saw it. For metrics.
struct BatchStats {
  int instance = 0;
  int64_t sequences = 0;       // rows in the batch
  int64_t requests = 0;        // requests with rows in the batch
  int64_t real_steps = 0;      // the sum of the sequences' lengths
  int64_t computed_steps = 0;  // sequences x the longest length: what a padding engine (cuDNN) pays
  absl::Duration compute;      // engine time, a retry that isolates a failing request included
  // For each request whose first rows run in this batch: how long it waited in the queue.
  std::vector<absl::Duration> queue_durations;
  absl::Status status;  // OK, or why the engine failed the batch
};

// Totals since the scheduler started. For metrics.
struct BatcherCounters {
  int64_t batches = 0;
  int64_t sequences = 0;
  int64_t real_steps = 0;
  int64_t computed_steps = 0;
  int64_t requests_completed = 0;  // answered with outputs
  int64_t requests_failed = 0;     // failed by the engine
  // DEADLINE_EXCEEDED while queued, or while running past its own deadline (abandon_watch.h)
  int64_t requests_expired = 0;
  int64_t requests_cancelled = 0;  // CANCELLED by its client, queued or running (abandon_watch.h)
  int64_t requests_rejected = 0;   // RESOURCE_EXHAUSTED: the queue was full
  int64_t queued_requests = 0;     // waiting now (a gauge)
};

// Called on a scheduler thread after every engine call; must not block.
using BatchObserver = std::function<void(const BatchStats&)>;

}  // namespace rnnserve::server::batching
