#pragma once

// The shared state store (server/core/state_store.h says the contract) on Redis, for several
// replicas serving the same sequences: any replica can continue any sequence, and one that was
// served by a replica that died continues elsewhere from its last stored chunk.
//
// BEHAVIOUR
//  - Each sequence is one Redis hash `<key_prefix><model>/<id>` with two fields: `epoch`
//    (decimal; 1 after its start, +1 per chunk) and `rec` (state_record.h: states, position,
//    owner, client, model version). Its TTL is the model's max_idle, renewed by every chunk.
//  - Written after every chunk, before the chunk is answered: a chunk whose states could not
//    be stored fails (UNAVAILABLE while Redis is unreachable), so an answered chunk is never
//    lost, whatever replica dies next. Draining has nothing left to flush.
//  - Affinity: the replica that ran a sequence's last chunk keeps it in memory with its epoch.
//    The next chunk asks Redis for the epoch only (one round trip, no states); the local copy
//    serves when it matches, else the record is read and checked (DecodeRecord against the
//    version's state shapes). A stale local copy is never used.
//  - Writes are compare-and-set on the epoch (Lua scripts, atomic in Redis): two chunks of one
//    sequence racing on two replicas both run, the first stores, the second is ABORTED and
//    its result dropped; the sequence stays as the first left it.
//  - Ownership holds across replicas: the record's owner is checked on every replica (another
//    owner's chunk is told the id is not live, a start that it is in use), so one caller cannot
//    continue another's sequence anywhere, nor learn that it is live.
//  - Bounds (Limits::max_sequences, Options::max_sequences_per_client) count the sequences this
//    replica holds in memory (started or continued here and not idle past max_idle), checked
//    at a start: they bound this process's memory, as the in-process store's do.
//  - A continued sequence runs on the version its record names; a replica that does not serve
//    that version answers FAILED_PRECONDITION naming it.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/state_store.h"
#include "server/store/redis_client.h"
#include "server/store/state_record.h"

namespace rnnserve::server::store {

enum class StoreOp { kAcquire, kRelease };

class RedisStore final : public core::StateStore {
 public:
  struct ModelFacts {
    int64_t version = 0;
    StateShapes shapes;
  };
  struct Options {
    std::string key_prefix = "rnnserve:seq:";
    std::function<absl::Time()> now = [] { return absl::Now(); };
    // A servable's version and state shapes (main.cc: Servable::version, StateShapesOf(ir())).
    std::function<ModelFacts(const Servable* servable)> facts;
    // The servable of a model version that a record names; NOT_FOUND when it is not loaded.
    std::function<absl::StatusOr<std::shared_ptr<const Servable>>(const std::string& model,
                                                                  int64_t version)>
        resolve;
    // As SequenceManager::Options::observer: a sequence this replica holds starts (true) or
    // leaves its memory (false). May be empty.
    std::function<void(const Servable* servable, bool started)> observer;
    int max_sequences_per_client = 128;  // must be positive
    // Each round trip to Redis: acquire (a start or a continue) or release (store or erase),
    // how long it took and how it ended (OK, or the error it gave the chunk). May be empty.
    std::function<void(StoreOp op, absl::Duration took, absl::StatusCode code)> on_round_trip;
    // A continued sequence was served from this replica's memory (true) or read from Redis
    // (false: resumed from the store). May be empty.
    std::function<void(bool from_memory)> on_continue;
  };
  // `client` is shared by every call; it must outlive the store.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Create(RedisClient* client, Options options);

  absl::StatusOr<Lease> Acquire(const std::string& model, uint64_t id, bool start,
                                std::shared_ptr<const Servable> servable, const Limits& limits,
                                const Caller& caller) override;
  absl::Status Release(const std::string& model, uint64_t id, LayerStates states, bool end,
                       bool failed, int64_t steps_added = 0) override;
  int EndOwner(const std::string& owner) override;

  // Sequences held in memory.
  int live() const;
  // Chunks served from memory (epoch matched) and from a record read from Redis.
  struct Counts {
    int64_t served_from_memory = 0;
    int64_t resumed_from_store = 0;
  };
  Counts counts() const;

 private:
  using Key = std::pair<std::string, uint64_t>;  // model, sequence id
  struct Local {
    std::shared_ptr<const Servable> servable;
    int64_t version = 0;  // servable's, as the record names it
    LayerStates states;
    int64_t steps = 0;
    uint64_t epoch = 0;  // the record's epoch these states are; 0: not known yet
    std::string owner;
    std::string client;
    absl::Time last_used;
    absl::Duration max_idle;
    bool busy = false;
    bool counted = false;  // in the bounds and announced to the observer
  };

  RedisStore(RedisClient* client, Options options)
      : client_(client), options_(std::move(options)) {}
  std::string KeyOf(const std::string& model, uint64_t id) const;
  // Steps 2 and 3 of Acquire, without the lock: the store's side of a start or a continue.
  absl::StatusOr<Lease> Start(const Key& key, const std::string& redis_key,
                              std::shared_ptr<const Servable> servable, const Limits& limits,
                              const Caller& caller);
  absl::StatusOr<Lease> Continue(const Key& key, const std::string& redis_key, const Caller& caller,
                                 uint64_t local_epoch);
  // Release without the report; *round_trip: whether it went to Redis.
  absl::Status Store(const std::string& model, uint64_t id, LayerStates states, bool end,
                     bool failed, int64_t steps_added, bool* round_trip);
  void EraseLocked(std::map<Key, Local>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountLocked(Local& local, const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a sequence from memory after a failed Acquire; the store is left as it is.
  void Forget(const Key& key);

  RedisClient* const client_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<Key, Local> local_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_model_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int> per_client_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rnnserve::server::store
