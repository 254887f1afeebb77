#include "server/sequence_manager.h"

#include "absl/strings/str_cat.h"
#include "server/servable.h"

namespace rnnserve::server {

absl::StatusOr<std::unique_ptr<SequenceManager>> SequenceManager::Create(Options options) {
  if (!options.now) return absl::InvalidArgumentError("SequenceManager needs a clock");
  if (options.max_sequences_per_client <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_sequences_per_client must be positive; was ", options.max_sequences_per_client));
  }
  return std::unique_ptr<SequenceManager>(new SequenceManager(std::move(options)));
}

namespace {

absl::Status NotLive(const std::string& model, uint64_t id) {
  return absl::InvalidArgumentError(
      absl::StrCat("sequence ", id, " of model '", model,
                   "' is not live: its first chunk must set start (or it was idle too long)"));
}

}  // namespace

absl::StatusOr<SequenceManager::Lease> SequenceManager::Acquire(
    const std::string& model, uint64_t id, bool start, std::shared_ptr<const Servable> servable,
    const Limits& limits, const Caller& caller) {
  if (limits.max_idle <= absl::ZeroDuration() || limits.max_sequences <= 0) {
    return absl::InternalError("sequence limits must be positive");
  }
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  const auto key = std::make_pair(model, id);
  auto it = sequences_.find(key);
  if (it != sequences_.end() && it->second.owner != caller.owner) {
    // Another owner's sequence: a chunk is told what it would be told of an id that is not
    // live, whether or not a chunk is in flight; a start only that the id is in use, not whose.
    if (!start) return NotLive(model, id);
    return absl::AlreadyExistsError(
        absl::StrCat("sequence ", id, " of model '", model, "' is in use; start another id"));
  }
  if (it != sequences_.end() && it->second.busy) {
    return absl::AbortedError(
        absl::StrCat("sequence ", id, " of model '", model, "' has a chunk in flight"));
  }
  if (start) {
    if (it != sequences_.end()) {
      return absl::AlreadyExistsError(
          absl::StrCat("sequence ", id, " of model '", model,
                       "' is live: end it (end=true) before starting it again"));
    }
    int& mine = per_client_[std::make_pair(model, caller.client)];
    if (mine >= options_.max_sequences_per_client) {
      if (mine == 0) per_client_.erase(std::make_pair(model, caller.client));
      return absl::ResourceExhaustedError(absl::StrCat(
          "this client holds ", mine, " live sequences of model '", model,
          "', the per-client limit (--max-sequences-per-client=", options_.max_sequences_per_client,
          "); end some or retry later"));
    }
    limits::ShareAsk ask;
    const limits::ShareVerdict v = shares_[model].Take(
        caller.client, 1, limits.max_sequences,
        limits::ShareFloor(limits.max_sequences, options_.fair_floor_percent), &ask);
    if (v != limits::ShareVerdict::kGranted) {
      if (mine == 0) per_client_.erase(std::make_pair(model, caller.client));
      if (shares_[model].total() == 0) shares_.erase(model);
      return absl::ResourceExhaustedError(absl::StrCat(
          "model '", model, "' has ", per_model_[model],
          " live sequences, its limit (config.pbtxt sequence_batching max_sequences) is ",
          limits.max_sequences,
          v == limits::ShareVerdict::kBoundFull ? ""
                                                : absl::StrCat("; ", limits::ExplainShare(ask, v)),
          "; end some or retry later"));
    }
    ++mine;
    ++per_model_[model];
    it = sequences_.emplace(key, Sequence{}).first;
    Notify(servable.get(), true);
    it->second.max_idle = limits.max_idle;
    it->second.servable = std::move(servable);
    it->second.owner = caller.owner;
    it->second.client = caller.client;
  } else if (it == sequences_.end()) {
    return NotLive(model, id);
  }
  it->second.busy = true;
  it->second.last_used = options_.now();
  return Lease{it->second.servable, it->second.states, it->second.steps};
}

absl::Status SequenceManager::Release(const std::string& model, uint64_t id, LayerStates states,
                                      bool end, bool failed, int64_t steps_added) {
  absl::MutexLock lock(&mu_);
  auto it = sequences_.find(std::make_pair(model, id));
  if (it == sequences_.end()) return absl::OkStatus();
  if (end || failed) {
    EraseLocked(it);
    return absl::OkStatus();
  }
  it->second.states = std::move(states);
  it->second.steps += steps_added;
  it->second.busy = false;
  it->second.last_used = options_.now();
  return absl::OkStatus();
}

int SequenceManager::live() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sequences_.size());
}

int SequenceManager::Expire() {
  absl::MutexLock lock(&mu_);
  return ExpireLocked();
}

int SequenceManager::ExpireLocked() {
  const absl::Time now = options_.now();
  int dropped = 0;
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (!it->second.busy && now - it->second.last_used > it->second.max_idle) {
      EraseLocked(it++);
      ++dropped;
    } else {
      ++it;
    }
  }
  return dropped;
}

int SequenceManager::EndOwner(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  int ended = 0;
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    if (!it->second.busy && it->second.owner == owner) {
      EraseLocked(it++);
      ++ended;
    } else {
      ++it;
    }
  }
  return ended;
}

void SequenceManager::EraseLocked(std::map<Key, Sequence>::iterator it) {
  Notify(it->second.servable.get(), false);
  --per_model_[it->first.first];
  if (auto share = shares_.find(it->first.first); share != shares_.end()) {
    share->second.Give(it->second.client, 1);
    if (share->second.total() == 0) shares_.erase(share);
  }
  const auto client = std::make_pair(it->first.first, it->second.client);
  if (auto c = per_client_.find(client); c != per_client_.end() && --c->second <= 0) {
    per_client_.erase(c);
  }
  sequences_.erase(it);
}

SequenceManager::Limits SequenceLimitsOf(const Servable& servable) {
  SequenceManager::Limits limits;
  const auto& seq = servable.config().sequence_batching();
  if (seq.max_sequence_idle_microseconds() > 0) {
    limits.max_idle = absl::Microseconds(seq.max_sequence_idle_microseconds());
  }
  if (seq.max_sequences() > 0) limits.max_sequences = seq.max_sequences();
  return limits;
}

}  // namespace rnnserve::server
