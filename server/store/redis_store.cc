#include "server/store/redis_store.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server::store {
namespace {

// Atomic in Redis. KEYS[1] is the sequence's hash.
// Start: creates it (epoch 1) unless it exists; 1, or the existing record. Run twice (a
// reply lost with its connection), the second finds its own record: 1.
constexpr char kCreate[] = R"(
local r = redis.call('HGET', KEYS[1], 'rec')
if r == ARGV[2] then return 1 end
if r then return r end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'rec', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1)";
// Continue: 0 when it is not live, 1 when its epoch is ARGV[1] (the local copy is current),
// else its record.
constexpr char kFetch[] = R"(
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e then return 0 end
if e == ARGV[1] then return 1 end
return redis.call('HGET', KEYS[1], 'rec'))";
// Store: when its epoch is still ARGV[1], the record ARGV[3] at epoch ARGV[2] and the TTL
// ARGV[4] ms; 1 stored (or stored already: run twice), 0 another chunk stored first, -1 not
// live.
constexpr char kStore[] = R"(
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e then return -1 end
if e == ARGV[2] and redis.call('HGET', KEYS[1], 'rec') == ARGV[3] then return 1 end
if e ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2], 'rec', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1)";
// End: deletes it when its epoch is still ARGV[1].
constexpr char kErase[] = R"(
if redis.call('HGET', KEYS[1], 'epoch') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0)";

std::string Ttl(absl::Duration max_idle) {
  return std::to_string(std::max<int64_t>(1, absl::ToInt64Milliseconds(max_idle)));
}

std::string Named(const std::string& model, uint64_t id) {
  return absl::StrCat("sequence ", id, " of model '", model, "'");
}

absl::Status NotLive(const std::string& model, uint64_t id) {
  return absl::InvalidArgumentError(absl::StrCat(
      Named(model, id), " is not live: its first chunk must set start (or it was idle too long)"));
}

// Another owner's sequence: a chunk is told what it would be told of an id that is not live,
// whether or not a chunk is in flight, so nothing shows that the id is live; a start is told
// only that the id is in use (it cannot start it), not whose.
absl::Status OtherOwner(const std::string& model, uint64_t id, bool start) {
  if (!start) return NotLive(model, id);
  return absl::AlreadyExistsError(absl::StrCat(Named(model, id), " is in use; start another id"));
}

bool IsInt(const RedisReply& r, int64_t v) {
  return r.type == RedisReply::Type::kInteger && r.integer == v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Create(RedisClient* client,
                                                               Options options) {
  if (client == nullptr) return absl::InvalidArgumentError("RedisStore needs a client");
  if (!options.now || !options.facts || !options.resolve) {
    return absl::InvalidArgumentError("RedisStore needs now, facts and resolve");
  }
  if (options.max_sequences_per_client <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_sequences_per_client must be positive; was ", options.max_sequences_per_client));
  }
  return std::unique_ptr<RedisStore>(new RedisStore(client, std::move(options)));
}

std::string RedisStore::KeyOf(const std::string& model, uint64_t id) const {
  return absl::StrCat(options_.key_prefix, model, "/", id);
}

absl::StatusOr<core::StateStore::Lease> RedisStore::Acquire(
    const std::string& model, uint64_t id, bool start, std::shared_ptr<const Servable> servable,
    const Limits& limits, const Caller& caller) {
  if (limits.max_idle <= absl::ZeroDuration() || limits.max_sequences <= 0) {
    return absl::InternalError("sequence limits must be positive");
  }
  const Key key(model, id);
  uint64_t local_epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked();
    auto it = local_.find(key);
    if (it != local_.end()) {
      if (it->second.owner != caller.owner) return OtherOwner(model, id, start);
      if (it->second.busy) {
        return absl::AbortedError(absl::StrCat(Named(model, id), " has a chunk in flight"));
      }
      if (start) {
        return absl::AlreadyExistsError(
            absl::StrCat(Named(model, id), " is live: end it (end=true) before starting it again"));
      }
      local_epoch = it->second.epoch;
    } else if (start) {
      if (per_model_[model] >= limits.max_sequences) {
        return absl::ResourceExhaustedError(
            absl::StrCat("model '", model, "' has ", limits.max_sequences,
                         " live sequences on this replica, its limit (config.pbtxt "
                         "sequence_batching max_sequences); end some or retry later"));
      }
      const int mine = per_client_[std::make_pair(model, caller.client)];
      if (mine >= options_.max_sequences_per_client) {
        return absl::ResourceExhaustedError(
            absl::StrCat("this client holds ", mine, " live sequences of model '", model,
                         "' on this replica, the per-client limit (--max-sequences-per-client=",
                         options_.max_sequences_per_client, "); end some or retry later"));
      }
    }
    if (it == local_.end()) {
      it = local_.emplace(key, Local{}).first;
      it->second.owner = caller.owner;
      it->second.client = caller.client;
    }
    it->second.busy = true;
    it->second.max_idle = limits.max_idle;
    it->second.last_used = options_.now();
  }
  const std::string redis_key = KeyOf(model, id);
  const absl::Time began = absl::Now();
  auto lease = start ? Start(key, redis_key, std::move(servable), limits, caller)
                     : Continue(key, redis_key, caller, local_epoch);
  if (options_.on_round_trip) {
    options_.on_round_trip(StoreOp::kAcquire, absl::Now() - began, lease.status().code());
  }
  if (!lease.ok()) Forget(key);
  return lease;
}

absl::StatusOr<core::StateStore::Lease> RedisStore::Start(const Key& key,
                                                          const std::string& redis_key,
                                                          std::shared_ptr<const Servable> servable,
                                                          const Limits& limits,
                                                          const Caller& caller) {
  const ModelFacts facts = options_.facts(servable.get());
  SequenceRecord record{.model_version = facts.version,
                        .steps = 0,
                        .epoch = 1,
                        .owner = caller.owner,
                        .client = caller.client};
  const std::string blob = EncodeRecord(record);
  auto reply = client_->Command({"EVAL", kCreate, "1", redis_key, "1", blob, Ttl(limits.max_idle)});
  if (!reply.ok()) return reply.status();
  if (!IsInt(*reply, 1)) {
    // Live on some replica: whose?
    if (reply->type == RedisReply::Type::kString) {
      auto other = DecodeHeader(reply->str);
      if (other.ok() && other->owner != caller.owner) {
        return OtherOwner(key.first, key.second, /*start=*/true);
      }
    }
    return absl::AlreadyExistsError(absl::StrCat(
        Named(key.first, key.second), " is live: end it (end=true) before starting it again"));
  }
  absl::MutexLock lock(&mu_);
  Local& local = local_.at(key);
  local.servable = servable;
  local.version = facts.version;
  local.epoch = 1;
  local.steps = 0;
  local.states.clear();
  CountLocked(local, key.first);
  return Lease{std::move(servable), {}, 0};
}

absl::StatusOr<core::StateStore::Lease> RedisStore::Continue(const Key& key,
                                                             const std::string& redis_key,
                                                             const Caller& caller,
                                                             uint64_t local_epoch) {
  const auto& [model, id] = key;
  auto reply = client_->Command({"EVAL", kFetch, "1", redis_key, std::to_string(local_epoch)});
  if (!reply.ok()) return reply.status();
  if (IsInt(*reply, 0)) return NotLive(model, id);
  if (IsInt(*reply, 1) && local_epoch > 0) {
    absl::MutexLock lock(&mu_);
    Local& local = local_.at(key);
    ++counts_.served_from_memory;
    if (options_.on_continue) options_.on_continue(true);
    return Lease{local.servable, std::move(local.states), local.steps};
  }
  if (reply->type != RedisReply::Type::kString) {
    return absl::UnavailableError(absl::StrCat("sequence store ", client_->endpoint().ToString(),
                                               " answered ", Named(model, id),
                                               " with something other than its record"));
  }
  auto header = DecodeHeader(reply->str);
  if (!header.ok()) return header.status();
  if (header->owner != caller.owner) return OtherOwner(model, id, /*start=*/false);
  auto servable = options_.resolve(model, header->model_version);
  if (!servable.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Named(model, id), " runs on version ", header->model_version,
                     ", which this replica does not serve: ", servable.status().message()));
  }
  auto record = DecodeRecord(reply->str, options_.facts(servable->get()).shapes);
  if (!record.ok()) {
    return absl::DataLossError(absl::StrCat(Named(model, id), ": ", record.status().message()));
  }
  if (record->epoch < local_epoch) {
    // This replica answered chunks the store no longer has (Redis restarted without its last
    // writes): continuing from the store would answer from older states.
    return absl::DataLossError(
        absl::StrCat(Named(model, id), ": the store holds its state after chunk ", record->epoch,
                     ", older than the chunk ", local_epoch,
                     " this replica answered (Redis lost writes); start the sequence again"));
  }
  absl::MutexLock lock(&mu_);
  Local& local = local_.at(key);
  local.servable = *servable;
  local.version = record->model_version;
  local.epoch = record->epoch;
  local.steps = record->steps;
  if (!local.counted) local.client = record->client;
  CountLocked(local, model);
  ++counts_.resumed_from_store;
  if (options_.on_continue) options_.on_continue(false);
  return Lease{*std::move(servable), std::move(record->states), record->steps};
}

absl::Status RedisStore::Release(const std::string& model, uint64_t id, LayerStates states,
                                 bool end, bool failed, int64_t steps_added) {
  const absl::Time began = absl::Now();
  bool round_trip = false;
  const absl::Status s = Store(model, id, std::move(states), end, failed, steps_added, &round_trip);
  if (round_trip && options_.on_round_trip) {
    options_.on_round_trip(StoreOp::kRelease, absl::Now() - began, s.code());
  }
  return s;
}

absl::Status RedisStore::Store(const std::string& model, uint64_t id, LayerStates states, bool end,
                               bool failed, int64_t steps_added, bool* round_trip) {
  const Key key(model, id);
  const std::string redis_key = KeyOf(model, id);
  SequenceRecord record;
  absl::Duration max_idle;
  std::string erase_epoch;  // set: the sequence ends
  {
    absl::MutexLock lock(&mu_);
    auto it = local_.find(key);
    if (it == local_.end()) return absl::OkStatus();
    Local& local = it->second;
    if (end || failed) {
      erase_epoch = std::to_string(local.epoch);
      EraseLocked(it);
    } else if (steps_added == 0) {  // nothing ran (refused by the window): nothing to store
      local.states = std::move(states);
      local.busy = false;
      local.last_used = options_.now();
      return absl::OkStatus();
    } else {
      record = {.model_version = local.version,
                .steps = local.steps + steps_added,
                .epoch = local.epoch + 1,
                .owner = local.owner,
                .client = local.client,
                .states = std::move(states)};
      max_idle = local.max_idle;
    }
  }
  *round_trip = true;
  if (!erase_epoch.empty()) {
    // A failed chunk's sequence ends too; an end that cannot reach Redis leaves a record that
    // expires after max_idle.
    (void)client_->Command({"EVAL", kErase, "1", redis_key, erase_epoch});
    return absl::OkStatus();
  }
  auto reply =
      client_->Command({"EVAL", kStore, "1", redis_key, std::to_string(record.epoch - 1),
                        std::to_string(record.epoch), EncodeRecord(record), Ttl(max_idle)});
  absl::MutexLock lock(&mu_);
  auto it = local_.find(key);  // still there: busy entries are not expired
  if (it == local_.end()) return absl::OkStatus();
  if (reply.ok() && IsInt(*reply, 1)) {
    it->second.states = std::move(record.states);
    it->second.steps = record.steps;
    it->second.epoch = record.epoch;
    it->second.busy = false;
    it->second.last_used = options_.now();
    return absl::OkStatus();
  }
  EraseLocked(it);
  if (!reply.ok()) {
    return absl::UnavailableError(
        absl::StrCat(Named(model, id),
                     ": this chunk's states could not be stored, so its answer is dropped "
                     "and the sequence stays as its previous chunk left it (resend the chunk): ",
                     reply.status().message()));
  }
  return absl::AbortedError(absl::StrCat(
      Named(model, id),
      IsInt(*reply, 0) ? " was advanced by another chunk (on another replica) while this one ran"
                       : " ended or expired while this chunk ran",
      "; this chunk's answer is dropped"));
}

int RedisStore::EndOwner(const std::string& owner) {
  std::vector<std::pair<std::string, std::string>> ended;  // redis key, epoch
  {
    absl::MutexLock lock(&mu_);
    for (auto it = local_.begin(); it != local_.end();) {
      if (!it->second.busy && it->second.owner == owner) {
        ended.emplace_back(KeyOf(it->first.first, it->first.second),
                           std::to_string(it->second.epoch));
        EraseLocked(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [redis_key, epoch] : ended) {
    (void)client_->Command({"EVAL", kErase, "1", redis_key, epoch});
  }
  return static_cast<int>(ended.size());
}

int RedisStore::live() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(local_.size());
}

RedisStore::Counts RedisStore::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

void RedisStore::Forget(const Key& key) {
  absl::MutexLock lock(&mu_);
  if (auto it = local_.find(key); it != local_.end()) EraseLocked(it);
}

void RedisStore::CountLocked(Local& local, const std::string& model) {
  if (local.counted) return;
  local.counted = true;
  ++per_model_[model];
  ++per_client_[std::make_pair(model, local.client)];
  if (options_.observer) options_.observer(local.servable.get(), true);
}

void RedisStore::EraseLocked(std::map<Key, Local>::iterator it) {
  Local& local = it->second;
  if (local.counted) {
    if (options_.observer) options_.observer(local.servable.get(), false);
    --per_model_[it->first.first];
    const auto client = std::make_pair(it->first.first, local.client);
    if (auto c = per_client_.find(client); c != per_client_.end() && --c->second <= 0) {
      per_client_.erase(c);
    }
  }
  local_.erase(it);
}

void RedisStore::ExpireLocked() {
  const absl::Time now = options_.now();
  for (auto it = local_.begin(); it != local_.end();) {
    if (!it->second.busy && now - it->second.last_used > it->second.max_idle) {
      EraseLocked(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace rnnserve::server::store
