#include "server/sequence_manager.h"

#include "absl/strings/str_cat.h"
#include "server/servable.h"

namespace rnnserve::server {

absl::StatusOr<std::unique_ptr<SequenceManager>> SequenceManager::Create(Options options) {
  if (!options.now) return absl::InvalidArgumentError("SequenceManager needs a clock");
  return std::unique_ptr<SequenceManager>(new SequenceManager(std::move(options)));
}

absl::StatusOr<SequenceManager::Lease> SequenceManager::Acquire(
    const std::string& model, uint64_t id, bool start, std::shared_ptr<const Servable> servable,
    const Limits& limits, const std::string& owner) {
  if (limits.max_idle <= absl::ZeroDuration() || limits.max_sequences <= 0) {
    return absl::InternalError("sequence limits must be positive");
  }
  absl::MutexLock lock(&mu_);
  ExpireLocked();
  const auto key = std::make_pair(model, id);
  auto it = sequences_.find(key);
  if (it != sequences_.end() && it->second.owner != owner) {
    // Another client's sequence: neither restarted nor continued, and left as it is.
    if (start) {
      return absl::AlreadyExistsError(absl::StrCat("sequence ", id, " of model '", model,
                                                   "' is live and belongs to another client; "
                                                   "choose another sequence id"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("sequence ", id, " of model '", model, "' belongs to another client"));
  }
  if (it != sequences_.end() && it->second.busy) {
    return absl::AbortedError(
        absl::StrCat("sequence ", id, " of model '", model, "' has a chunk in flight"));
  }
  if (start) {
    if (it == sequences_.end()) {
      if (per_model_[model] >= limits.max_sequences) {
        return absl::ResourceExhaustedError(
            absl::StrCat("model '", model, "' has ", limits.max_sequences,
                         " live sequences, its limit; end some or retry later"));
      }
      int& mine = per_owner_[{model, owner}];
      if (options_.max_per_owner > 0 && mine >= options_.max_per_owner) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "this client holds ", mine, " live sequences of model '", model,
            "', the limit for one client (--max-sequences-per-client); end some first"));
      }
      it = sequences_.emplace(key, Sequence{}).first;
      it->second.owner = owner;
      ++per_model_[model];
      ++mine;
    } else {
      Notify(it->second.servable.get(), false);  // restarted by its owner: the old run ends
    }
    Notify(servable.get(), true);
    it->second.max_idle = limits.max_idle;
    it->second.servable = std::move(servable);
    it->second.states.clear();
    it->second.steps = 0;
  } else if (it == sequences_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", id, " of model '", model,
                     "' is not live: its first chunk must set start (or it was idle too long)"));
  }
  it->second.busy = true;
  it->second.last_used = options_.now();
  return Lease{it->second.servable, it->second.states, it->second.steps};
}

void SequenceManager::EraseLocked(
    std::map<std::pair<std::string, uint64_t>, Sequence>::iterator it) {
  --per_model_[it->first.first];
  const auto owner_key = std::make_pair(it->first.first, it->second.owner);
  if (--per_owner_[owner_key] <= 0) per_owner_.erase(owner_key);
  Notify(it->second.servable.get(), false);
  sequences_.erase(it);
}

void SequenceManager::Release(const std::string& model, uint64_t id, LayerStates states, bool end,
                              bool failed, int64_t steps_added) {
  absl::MutexLock lock(&mu_);
  auto it = sequences_.find(std::make_pair(model, id));
  if (it == sequences_.end()) return;
  if (end || failed) {
    EraseLocked(it);
    return;
  }
  it->second.states = std::move(states);
  it->second.steps += steps_added;
  it->second.busy = false;
  it->second.last_used = options_.now();
}

int SequenceManager::EndOwnedBy(const std::string& owner) {
  absl::MutexLock lock(&mu_);
  int ended = 0;
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    auto next = std::next(it);
    if (it->second.owner == owner && !it->second.busy) {
      EraseLocked(it);
      ++ended;
    }
    it = next;
  }
  return ended;
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
    auto next = std::next(it);
    if (!it->second.busy && now - it->second.last_used > it->second.max_idle) {
      EraseLocked(it);
      ++dropped;
    }
    it = next;
  }
  return dropped;
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
