#pragma once

// The shared state store (server/core/state_store.h says the contract) on Redis, for several
// replicas serving the same sequences: any replica can continue any sequence, and one that was
// served by a replica that died continues elsewhere from its last stored chunk.
//
// BEHAVIOUR
//  - Each sequence is one Redis hash `<key_prefix><model>/<id>` with two fields: `epoch`
//    (decimal; 1 after its start, +1 per chunk) and `rec` (state_record.h: states, position,
//    owner, client, model version). Its TTL is the model's max_idle, renewed by every chunk.
//  - Durability (Options::durability, --sequence-durability):
//    kChunk (default): written after every chunk, before the chunk is answered: a chunk whose
//      states could not be stored fails (UNAVAILABLE while Redis is unreachable), so an
//      answered chunk is never lost, whatever replica dies next. Draining has nothing to flush.
//      Two round trips a chunk (the epoch check before it runs, the write after).
//    kDrain: a start writes the record with this replica as its `holder`; the holder's later
//      chunks touch Redis only to renew its TTL (once per max_idle / 2), and their states stay
//      in memory. Drain() (SIGTERM) writes every held sequence back and gives up its holds;
//      from then on the replica writes every chunk as kChunk does. A sequence idle past
//      max_idle leaves memory and Redis (the record a kChunk replica would have let expire at
//      that time). Another replica never serves a held sequence from its stale record: while
//      the holder's heartbeat key (Options::heartbeat_ttl) lives, that chunk is UNAVAILABLE
//      and the holder is asked to hand it over (a set `<replica_key_prefix><id>:hand-over`
//      that the holder reads at each heartbeat, writing those sequences back and giving up
//      their holds): a retry a heartbeat later continues it, so holds follow the proxy when
//      its routing changes (a replica added or taken out); once it has expired (the holder died
//      without draining: SIGKILL, OOM, a node lost), the sequence is LOST: the chunk gets
//      DATA_LOSS, its record is deleted, and Options::on_lost counts it
//      (rnnserve_sequences_lost_total on the replica that found it). Every replica of a
//      deployment must run with the same durability.
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
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/core/state_store.h"
#include "server/limits/fair_share.h"
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
  enum class Durability { kChunk, kDrain };  // BEHAVIOUR above
  struct Options {
    std::string key_prefix = "rnnserve:seq:";
    Durability durability = Durability::kChunk;
    // This replica's name in the records it holds (kDrain) and in its heartbeat key
    // `<replica_key_prefix><replica_id>`; empty: the host name and a random suffix.
    std::string replica_id;
    std::string replica_key_prefix = "rnnserve:replica:";
    // kDrain: the heartbeat key lives this long and is renewed every third of it; a sequence
    // whose holder's key expired is lost. Must be positive.
    absl::Duration heartbeat_ttl = absl::Seconds(3);
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
    // Per-caller shares of Limits::max_sequences on this replica (server/limits/fair_share.h,
    // as SequenceManager::Options::fair_floor_percent); 100: first come, first served.
    int fair_floor_percent = 100;
    // Each round trip to Redis: acquire (a start or a continue) or release (store or erase),
    // how long it took and how it ended (OK, or the error it gave the chunk). May be empty.
    std::function<void(StoreOp op, absl::Duration took, absl::StatusCode code)> on_round_trip;
    // A continued sequence was served from this replica's memory (true) or read from Redis
    // (false: resumed from the store). May be empty.
    std::function<void(bool from_memory)> on_continue;
    // A chunk found a sequence lost (its holder died without handing it over). May be empty.
    std::function<void()> on_lost;
  };
  // `client` is shared by every call; it must outlive the store.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Create(RedisClient* client, Options options);

  absl::StatusOr<Lease> Acquire(const std::string& model, uint64_t id, bool start,
                                std::shared_ptr<const Servable> servable, const Limits& limits,
                                const Caller& caller) override;
  absl::Status Release(const std::string& model, uint64_t id, LayerStates states, bool end,
                       bool failed, int64_t steps_added = 0) override;
  int EndOwner(const std::string& owner) override;

  // SIGTERM's drain: every sequence this replica holds in memory (kDrain) is written to Redis
  // and its hold given up, and from now on every chunk is written as kChunk does (a chunk in
  // flight now is written by its Release). Chunks that arrive meanwhile wait for the flush.
  // `flushed`: sequences written; `failed`: not written (Redis unreachable): they are lost
  // once this replica exits, and the replica that meets them counts them.
  struct DrainResult {
    int flushed = 0;
    int failed = 0;
  };
  DrainResult Drain();
  // Stops the heartbeat and deletes its key: what this replica still holds is lost at once.
  ~RedisStore() override;
  const std::string& replica_id() const { return options_.replica_id; }

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
    uint64_t epoch = 0;         // the epoch these states are; 0: not known yet
    uint64_t stored_epoch = 0;  // the record's epoch in Redis (== epoch unless held)
    bool held = false;          // this replica is the record's holder (kDrain)
    absl::Time stored_at;       // the record's TTL was last set (held: renewed at max_idle/2)
    std::string owner;
    std::string client;
    absl::Time last_used;
    absl::Duration max_idle;
    bool busy = false;
    bool counted = false;    // in the bounds and announced to the observer
    bool hand_over = false;  // held, and asked for by another replica: its Release writes it
  };

  // What Acquire knew of its sequence in memory.
  struct Known {
    bool in_memory = false;
    bool held = false;
    uint64_t stored_epoch = 0;
    absl::Time stored_at;
  };
  // A record to delete when its epoch and holder are still these.
  struct Erase {
    std::string redis_key;
    uint64_t epoch = 0;
    std::string holder;
  };

  RedisStore(RedisClient* client, Options options)
      : client_(client), options_(std::move(options)) {}
  std::string KeyOf(const std::string& model, uint64_t id) const;
  // Steps 2 and 3 of Acquire, without the lock: the store's side of a start or a continue.
  absl::StatusOr<Lease> Start(const Key& key, const std::string& redis_key,
                              std::shared_ptr<const Servable> servable, const Limits& limits,
                              const Caller& caller);
  absl::StatusOr<Lease> Continue(const Key& key, const std::string& redis_key, const Caller& caller,
                                 const Limits& limits, Known known);
  // Continue's answer when another replica holds the sequence (`reply`: {holder, epoch, rec}).
  absl::Status HeldElsewhere(const Key& key, const std::string& redis_key, const Caller& caller,
                             const RedisReply& reply);
  // The local copy, for a chunk that continues it from memory.
  absl::StatusOr<Lease> FromMemory(const Key& key, bool take_hold);
  bool TakesHolds() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return options_.durability == Durability::kDrain && !draining_;
  }
  void RunErases(const std::vector<Erase>& erases);
  // Renews the heartbeat key and hands over what other replicas asked for: at Create, then
  // every heartbeat_ttl / 3 on heartbeat_.
  void Beat();
  void Heartbeat();
  // Writes the held sequences `pick` chooses back to Redis and gives up their holds; a busy
  // one is written by its Release.
  DrainResult Flush(const std::function<bool(const Key&)>& pick);
  std::string HandOverKey(const std::string& replica) const {
    return options_.replica_key_prefix + replica + ":hand-over";
  }
  std::string HeartbeatKey(const std::string& replica) const {
    return options_.replica_key_prefix + replica;
  }
  // Release without the report; *round_trip: whether it went to Redis.
  absl::Status Store(const std::string& model, uint64_t id, LayerStates states, bool end,
                     bool failed, int64_t steps_added, bool* round_trip);
  void EraseLocked(std::map<Key, Local>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What CheckShare weighs for `client` starting one more sequence of `model` here.
  limits::ShareAsk ShareAskLocked(const std::string& model, const std::string& client,
                                  int64_t capacity) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountLocked(Local& local, const std::string& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops sequences idle past max_idle; held ones are returned, for their records to go too.
  std::vector<Erase> ExpireLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a sequence from memory after a failed Acquire; the store is left as it is.
  void Forget(const Key& key);

  RedisClient* const client_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<Key, Local> local_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_model_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int> per_client_ ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;  // Drain() was called: no more holds
  int flushing_ ABSL_GUARDED_BY(mu_) = 0;       // Flush() calls writing: Acquire waits

  absl::Mutex beat_mu_;
  bool stop_beating_ ABSL_GUARDED_BY(beat_mu_) = false;
  std::thread heartbeat_;  // kDrain only
};

}  // namespace rnnserve::server::store
