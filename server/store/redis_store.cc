#include "server/store/redis_store.h"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "server/limits/fair_share.h"
#include "server/store/redis_scripts.h"
#include "server/store/redis_store_util.h"

namespace rnnserve::server::store {
namespace {

// The host name (a pod's name in Kubernetes) and a random suffix.
std::string NewReplicaId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') std::strcpy(host, "replica");
  absl::BitGen gen;
  return absl::StrCat(host, "-", absl::Hex(absl::Uniform<uint32_t>(gen), absl::kZeroPad8));
}

}  // namespace

namespace internal {

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

absl::Status OtherOwner(const std::string& model, uint64_t id, bool start) {
  if (!start) return NotLive(model, id);
  return absl::AlreadyExistsError(absl::StrCat(Named(model, id), " is in use; start another id"));
}

bool IsInt(const RedisReply& r, int64_t v) {
  return r.type == RedisReply::Type::kInteger && r.integer == v;
}

}  // namespace internal

using internal::IsInt;
using internal::Named;
using internal::NotLive;
using internal::OtherOwner;
using internal::Ttl;

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
  if (options.heartbeat_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat_ttl must be positive; was ",
                                                   absl::FormatDuration(options.heartbeat_ttl)));
  }
  if (options.replica_id.empty()) options.replica_id = NewReplicaId();
  auto store = std::unique_ptr<RedisStore>(new RedisStore(client, std::move(options)));
  if (store->options_.durability == Durability::kDrain) {
    store->Beat();  // before any hold is taken
    store->heartbeat_ = std::thread([s = store.get()] { s->Heartbeat(); });
  }
  return store;
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
  Known known;
  std::vector<Erase> expired;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* flushing) { return *flushing == 0; }, &flushing_));
    expired = ExpireLocked();
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
      known = {.in_memory = it->second.epoch > 0,
               .held = it->second.held,
               .stored_epoch = it->second.stored_epoch,
               .stored_at = it->second.stored_at};
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
      const limits::ShareAsk ask = ShareAskLocked(model, caller.client, limits.max_sequences);
      if (const limits::ShareVerdict v = limits::CheckShare(ask);
          v != limits::ShareVerdict::kGranted) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "model '", model, "' has ", per_model_[model],
            " live sequences on this replica, its limit (config.pbtxt sequence_batching "
            "max_sequences) is ",
            limits.max_sequences, "; ", limits::ExplainShare(ask, v), "; end some or retry later"));
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
  RunErases(expired);
  const std::string redis_key = KeyOf(model, id);
  const absl::Time began = absl::Now();
  bool round_trip = true;
  absl::StatusOr<Lease> lease;
  if (start) {
    lease = Start(key, redis_key, std::move(servable), limits, caller);
  } else if (known.held && options_.now() - known.stored_at < limits.max_idle / 2) {
    // Held here (kDrain) and its TTL far from running out: memory only.
    round_trip = false;
    lease = FromMemory(key, /*take_hold=*/false);
  } else {
    lease = Continue(key, redis_key, caller, limits, known);
  }
  if (round_trip && options_.on_round_trip) {
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
  bool hold = false;
  {
    absl::MutexLock lock(&mu_);
    hold = TakesHolds();
  }
  const std::string blob = EncodeRecord(record);
  auto reply = client_->Eval(scripts::kCreate, {"1", redis_key, "1", blob, Ttl(limits.max_idle),
                                                hold ? options_.replica_id : ""});
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
  local.epoch = local.stored_epoch = 1;
  local.held = hold;
  local.stored_at = options_.now();
  local.steps = 0;
  local.states.clear();
  CountLocked(local, key.first);
  return Lease{std::move(servable), {}, 0};
}

absl::StatusOr<core::StateStore::Lease> RedisStore::FromMemory(const Key& key, bool take_hold) {
  absl::MutexLock lock(&mu_);
  Local& local = local_.at(key);
  if (take_hold) {
    local.held = true;
    local.stored_at = options_.now();
  }
  ++counts_.served_from_memory;
  if (options_.on_continue) options_.on_continue(true);
  return Lease{local.servable, std::move(local.states), local.steps};
}

absl::StatusOr<core::StateStore::Lease> RedisStore::Continue(const Key& key,
                                                             const std::string& redis_key,
                                                             const Caller& caller,
                                                             const Limits& limits, Known known) {
  const auto& [model, id] = key;
  if (known.held) {
    // Held here, its TTL due for renewal: renewed, and served from memory, unless this replica
    // lost the hold (another replica found its heartbeat lapsed and counted it lost).
    auto touched =
        client_->Eval(scripts::kTouch, {"1", redis_key, options_.replica_id, Ttl(limits.max_idle)});
    if (!touched.ok()) return touched.status();
    if (IsInt(*touched, 1)) return FromMemory(key, /*take_hold=*/true);
    {
      absl::MutexLock lock(&mu_);
      local_.at(key).held = false;
    }
    known = {};
  }
  bool take = false;
  {
    absl::MutexLock lock(&mu_);
    take = TakesHolds();
  }
  if (known.in_memory && !take) {
    // The common case of affinity: is the local copy current? A plain HMGET (no script);
    // anything but "current, held by nobody" goes on to the script below.
    auto fields = client_->Command({"HMGET", redis_key, "epoch", "holder"});
    if (!fields.ok()) return fields.status();
    if (fields->type == RedisReply::Type::kArray && fields->elements.size() == 2) {
      const RedisReply& epoch = fields->elements[0];
      if (epoch.type == RedisReply::Type::kNil) return NotLive(model, id);
      if (epoch.type == RedisReply::Type::kString &&
          epoch.str == std::to_string(known.stored_epoch) &&
          fields->elements[1].type == RedisReply::Type::kNil) {
        return FromMemory(key, /*take_hold=*/false);
      }
    }
  }
  auto reply = client_->Eval(scripts::kFetch, {"1", redis_key, std::to_string(known.stored_epoch),
                                               options_.replica_id, take ? "1" : "0"});
  if (!reply.ok()) return reply.status();
  if (IsInt(*reply, 0)) return NotLive(model, id);
  if (reply->type == RedisReply::Type::kArray) {
    return HeldElsewhere(key, redis_key, caller, *reply);
  }
  if (IsInt(*reply, 1) && known.in_memory) return FromMemory(key, take);
  // Past here a hold taken is given back if the chunk cannot go on.
  const auto failed = [&](absl::Status s) {
    if (take) (void)client_->Eval(scripts::kUnhold, {"1", redis_key, options_.replica_id});
    return s;
  };
  if (reply->type != RedisReply::Type::kString) {
    return failed(absl::UnavailableError(
        absl::StrCat("sequence store ", client_->endpoint().ToString(), " answered ",
                     Named(model, id), " with something other than its record")));
  }
  auto header = DecodeHeader(reply->str);
  if (!header.ok()) return failed(header.status());
  if (header->owner != caller.owner) return failed(OtherOwner(model, id, /*start=*/false));
  auto servable = options_.resolve(model, header->model_version);
  if (!servable.ok()) {
    return failed(absl::FailedPreconditionError(
        absl::StrCat(Named(model, id), " runs on version ", header->model_version,
                     ", which this replica does not serve: ", servable.status().message())));
  }
  auto record = DecodeRecord(reply->str, options_.facts(servable->get()).shapes);
  if (!record.ok()) {
    return failed(
        absl::DataLossError(absl::StrCat(Named(model, id), ": ", record.status().message())));
  }
  if (record->epoch < known.stored_epoch) {
    // This replica answered chunks the store no longer has (Redis restarted without its last
    // writes): continuing from the store would answer from older states.
    return failed(absl::DataLossError(
        absl::StrCat(Named(model, id), ": the store holds its state after chunk ", record->epoch,
                     ", older than the chunk ", known.stored_epoch,
                     " this replica answered (Redis lost writes); start the sequence again")));
  }
  absl::MutexLock lock(&mu_);
  Local& local = local_.at(key);
  local.servable = *servable;
  local.version = record->model_version;
  local.epoch = local.stored_epoch = record->epoch;
  local.held = take;
  local.stored_at = options_.now();
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
  std::string holder;          // the holder the record has now: this replica, or none
  std::optional<Erase> erase;  // set: the sequence ends
  uint64_t stored_epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = local_.find(key);
    if (it == local_.end()) return absl::OkStatus();
    Local& local = it->second;
    if (local.held) holder = options_.replica_id;
    if (end || failed) {
      erase = Erase{redis_key, local.stored_epoch, holder};
      EraseLocked(it);
    } else if (steps_added == 0) {  // nothing ran (refused by the window): nothing to store
      local.states = std::move(states);
      local.busy = false;
      local.last_used = options_.now();
      return absl::OkStatus();
    } else if (local.held && !draining_ && !local.hand_over) {  // kDrain: memory only
      local.states = std::move(states);
      local.steps += steps_added;
      ++local.epoch;
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
      stored_epoch = local.stored_epoch;
      max_idle = local.max_idle;
    }
  }
  *round_trip = true;
  if (erase.has_value()) {
    // A failed chunk's sequence ends too; an end that cannot reach Redis leaves a record that
    // expires after max_idle.
    RunErases({*erase});
    return absl::OkStatus();
  }
  auto reply = client_->Eval(
      scripts::kStore, {"1", redis_key, std::to_string(stored_epoch), std::to_string(record.epoch),
                        EncodeRecord(record), Ttl(max_idle), holder});
  absl::MutexLock lock(&mu_);
  auto it = local_.find(key);  // still there: busy entries are not expired
  if (it == local_.end()) return absl::OkStatus();
  if (reply.ok() && IsInt(*reply, 1)) {
    Local& local = it->second;
    local.states = std::move(record.states);
    local.steps = record.steps;
    local.epoch = local.stored_epoch = record.epoch;
    local.held = false;
    local.hand_over = false;
    local.stored_at = options_.now();
    local.busy = false;
    local.last_used = options_.now();
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
  std::vector<Erase> ended;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = local_.begin(); it != local_.end();) {
      if (!it->second.busy && it->second.owner == owner) {
        ended.push_back({KeyOf(it->first.first, it->first.second), it->second.stored_epoch,
                         it->second.held ? options_.replica_id : ""});
        EraseLocked(it++);
      } else {
        ++it;
      }
    }
  }
  RunErases(ended);
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

limits::ShareAsk RedisStore::ShareAskLocked(const std::string& model, const std::string& client,
                                            int64_t capacity) const {
  limits::ShareAsk ask{.capacity = capacity,
                       .floor = limits::ShareFloor(capacity, options_.fair_floor_percent),
                       .active = 0,
                       .amount = 1};
  if (auto t = per_model_.find(model); t != per_model_.end()) ask.total = t->second;
  for (auto c = per_client_.lower_bound(std::make_pair(model, std::string()));
       c != per_client_.end() && c->first.first == model; ++c) {
    if (c->second <= 0) continue;
    ++ask.active;
    if (c->first.second == client) ask.held = c->second;
  }
  if (ask.held == 0) ++ask.active;  // the asking caller counts
  return ask;
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

std::vector<RedisStore::Erase> RedisStore::ExpireLocked() {
  std::vector<Erase> held;
  const absl::Time now = options_.now();
  for (auto it = local_.begin(); it != local_.end();) {
    if (!it->second.busy && now - it->second.last_used > it->second.max_idle) {
      if (it->second.held) {
        held.push_back({KeyOf(it->first.first, it->first.second), it->second.stored_epoch,
                        options_.replica_id});
      }
      EraseLocked(it++);
    } else {
      ++it;
    }
  }
  return held;
}

}  // namespace rnnserve::server::store
