#pragma once

// The in-process state store (server/core/state_store.h says the contract: start, owner,
// one chunk at a time, release) of stateful sequences: for each live sequence, every recurrent
// layer's final states after its last chunk. Besides the contract:
//  - A sequence idle for longer than its model's max_idle is dropped; the next chunk for it is
//    refused.
//  - At most Limits::max_sequences live sequences per model, shared fairly among the clients
//    that hold some (server/limits/fair_share.h, Options::fair_floor_percent), and at most
//    Options::max_sequences_per_client of them started by one Caller::client (so one client
//    cannot take every slot of a model); one more gets RESOURCE_EXHAUSTED naming the limit.
//  - The version a sequence started on serves all of its chunks (the servable is pinned).
// Time comes from Options::now, so tests pin idle expiry without sleeping.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/tensor.h"
#include "server/core/state_store.h"
#include "server/limits/fair_share.h"

namespace rnnserve::server {

class SequenceManager final : public core::StateStore {
 public:
  struct Options {
    std::function<absl::Time()> now = [] { return absl::Now(); };
    // Told when a sequence starts (true) and when it ends, fails or expires (false), with the
    // version it runs on (for the rnnserve_sequences_active gauge). Called under the lock: keep
    // it cheap. May be empty.
    std::function<void(const Servable* servable, bool started)> observer;
    // Live sequences of one model one Caller::client may hold (--max-sequences-per-client);
    // must be positive. The model's own max_sequences still caps all clients together.
    int max_sequences_per_client = 128;
    // A model's max_sequences is shared among the clients that hold sequences of it with this
    // floor (--fair-floor-percent, fair_share.h); 100: first come, first served.
    int fair_floor_percent = 100;
  };
  static absl::StatusOr<std::unique_ptr<SequenceManager>> Create(Options options);

  absl::StatusOr<Lease> Acquire(const std::string& model, uint64_t id, bool start,
                                std::shared_ptr<const Servable> servable, const Limits& limits,
                                const Caller& caller) override;
  absl::Status Release(const std::string& model, uint64_t id, LayerStates states, bool end,
                       bool failed, int64_t steps_added = 0) override;
  int EndOwner(const std::string& owner) override;

  int live() const;
  // Drops sequences idle past max_idle; returns how many.
  int Expire();

 private:
  explicit SequenceManager(Options options) : options_(std::move(options)) {}
  int ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const Servable* servable, bool started) const {
    if (options_.observer) options_.observer(servable, started);
  }

  struct Sequence {
    std::shared_ptr<const Servable> servable;
    LayerStates states;
    int64_t steps = 0;  // time steps of the chunks so far
    absl::Time last_used;
    absl::Duration max_idle;
    bool busy = false;   // a chunk holds it
    std::string owner;   // Caller::owner that started it
    std::string client;  // Caller::client that started it (its quota slot)
  };
  using Key = std::pair<std::string, uint64_t>;  // model, sequence id
  // Drops a sequence and its counts.
  void EraseLocked(std::map<Key, Sequence>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  std::map<Key, Sequence> sequences_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_model_ ABSL_GUARDED_BY(mu_);  // live sequences by model
  // Live sequences by (model, client); an entry is erased when it reaches zero.
  std::map<std::pair<std::string, std::string>, int> per_client_ ABSL_GUARDED_BY(mu_);
  // Each model's live sequences by client, for the fair shares of its max_sequences.
  std::map<std::string, limits::ShareLedger> shares_ ABSL_GUARDED_BY(mu_);
};

// A model's limits from its config.pbtxt sequence_batching block (defaults where unset).
SequenceManager::Limits SequenceLimitsOf(const Servable& servable);

}  // namespace rnnserve::server
