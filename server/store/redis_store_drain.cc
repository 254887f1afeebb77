// The Redis store's --sequence-durability=drain side (redis_store.h, BEHAVIOUR): the holds a
// replica keeps on the sequences whose newest states live only in its memory, its heartbeat,
// the hand-over at SIGTERM, and what another replica does with a sequence held elsewhere.

#include "absl/strings/str_cat.h"
#include "server/store/redis_scripts.h"
#include "server/store/redis_store.h"
#include "server/store/redis_store_util.h"

namespace rnnserve::server::store {

using internal::Named;
using internal::OtherOwner;
using internal::Ttl;

RedisStore::~RedisStore() {
  if (!heartbeat_.joinable()) return;
  {
    absl::MutexLock lock(&beat_mu_);
    stop_beating_ = true;
  }
  heartbeat_.join();
  // What is still held here (a flush that failed) is lost from now on, not in heartbeat_ttl.
  (void)client_->Command({"DEL", HeartbeatKey(options_.replica_id)});
}

void RedisStore::Heartbeat() {
  const std::string key = HeartbeatKey(options_.replica_id);
  const std::string ttl = Ttl(options_.heartbeat_ttl);
  absl::MutexLock lock(&beat_mu_);
  while (!stop_beating_) {
    beat_mu_.Unlock();
    // Unreachable Redis: the next beat tries again; held sequences may be found lost meanwhile
    // (after heartbeat_ttl), as they would be if this replica had died.
    (void)client_->Command({"SET", key, "1", "PX", ttl});
    beat_mu_.Lock();
    beat_mu_.AwaitWithTimeout(absl::Condition(&stop_beating_), options_.heartbeat_ttl / 3);
  }
}

absl::Status RedisStore::HeldElsewhere(const Key& key, const std::string& redis_key,
                                       const Caller& caller, const RedisReply& reply) {
  const auto& [model, id] = key;
  if (reply.elements.size() != 3 || reply.elements[0].type != RedisReply::Type::kString ||
      reply.elements[1].type != RedisReply::Type::kString) {
    return absl::UnavailableError(absl::StrCat("sequence store ", client_->endpoint().ToString(),
                                               " answered ", Named(model, id),
                                               " with a malformed holder"));
  }
  const std::string& holder = reply.elements[0].str;
  // Nothing shows another caller that the id is live, held or lost.
  auto header = DecodeHeader(reply.elements[2].str);
  if (!header.ok()) return header.status();
  if (header->owner != caller.owner) return OtherOwner(model, id, /*start=*/false);
  auto alive = client_->Command({"EXISTS", HeartbeatKey(holder)});
  if (!alive.ok()) return alive.status();
  if (!internal::IsInt(*alive, 0)) {
    return absl::UnavailableError(absl::StrCat(
        Named(model, id), " is held in memory by replica ", holder,
        " (--sequence-durability=drain) and not handed over yet: its chunks go to that replica "
        "(route by x-sequence-id); retry, it is handed over when that replica drains"));
  }
  // The holder died without draining: what it answered since the record was written is gone.
  auto erased = client_->Eval(scripts::kErase, {"1", redis_key, reply.elements[1].str, holder});
  if (!erased.ok()) return erased.status();
  if (internal::IsInt(*erased, 1) && options_.on_lost) options_.on_lost();
  return absl::DataLossError(absl::StrCat(
      Named(model, id), " is lost: replica ", holder,
      " kept its states in memory (--sequence-durability=drain) and stopped without handing "
      "them over (killed, not drained); start the sequence again"));
}

RedisStore::DrainResult RedisStore::Drain() {
  struct Flush {
    Key key;
    std::string redis_key;
    uint64_t stored_epoch = 0;
    uint64_t epoch = 0;
    std::string blob;
    absl::Duration max_idle;
  };
  std::vector<Flush> flushes;
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (auto& [key, local] : local_) {
      if (!local.held || local.busy) continue;  // a busy one is written by its Release
      flushes.push_back({key, KeyOf(key.first, key.second), local.stored_epoch, local.epoch,
                         EncodeRecord({.model_version = local.version,
                                       .steps = local.steps,
                                       .epoch = local.epoch,
                                       .owner = local.owner,
                                       .client = local.client,
                                       .states = local.states}),
                         local.max_idle});
    }
    if (flushes.empty()) return {};
    flushing_ = true;  // Acquire waits: no chunk runs on a sequence being written
  }
  std::vector<bool> done(flushes.size(), false);
  for (size_t i = 0; i < flushes.size(); ++i) {
    const Flush& f = flushes[i];
    auto reply = client_->Eval(scripts::kStore, {"1", f.redis_key, std::to_string(f.stored_epoch),
                                                 std::to_string(f.epoch), f.blob,
                                                 Ttl(f.max_idle), options_.replica_id});
    done[i] = reply.ok() && internal::IsInt(*reply, 1);
  }
  DrainResult result;
  absl::MutexLock lock(&mu_);
  flushing_ = false;
  for (size_t i = 0; i < flushes.size(); ++i) {
    if (!done[i]) {
      ++result.failed;
      continue;
    }
    ++result.flushed;
    if (auto it = local_.find(flushes[i].key); it != local_.end()) {
      it->second.held = false;
      it->second.stored_epoch = flushes[i].epoch;
      it->second.stored_at = options_.now();
    }
  }
  return result;
}

void RedisStore::RunErases(const std::vector<Erase>& erases) {
  for (const Erase& e : erases) {
    (void)client_->Eval(scripts::kErase,
                        {"1", e.redis_key, std::to_string(e.epoch), e.holder});
  }
}

}  // namespace rnnserve::server::store
