// The Redis store's --sequence-durability=drain side (redis_store.h, BEHAVIOUR): the holds a
// replica keeps on the sequences whose newest states live only in its memory, its heartbeat,
// the hand-over at SIGTERM, and what another replica does with a sequence held elsewhere.

#include <set>

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

void RedisStore::Beat() {
  // Unreachable Redis: the next beat tries again; held sequences may be found lost meanwhile
  // (after heartbeat_ttl), as they would be if this replica had died.
  (void)client_->Command(
      {"SET", HeartbeatKey(options_.replica_id), "1", "PX", Ttl(options_.heartbeat_ttl)});
  // Sequences other replicas were asked for (the proxy sends their chunks there now).
  auto asked = client_->Eval(scripts::kTakeHandOvers, {"1", HandOverKey(options_.replica_id)});
  if (asked.ok() && !asked->elements.empty()) {
    std::set<std::string> keys;
    for (const RedisReply& k : asked->elements) keys.insert(k.str);
    Flush([&](const Key& k) { return keys.count(KeyOf(k.first, k.second)) > 0; });
  }
}

void RedisStore::Heartbeat() {
  absl::MutexLock lock(&beat_mu_);
  while (!beat_mu_.AwaitWithTimeout(absl::Condition(&stop_beating_), options_.heartbeat_ttl / 3)) {
    beat_mu_.Unlock();
    Beat();
    beat_mu_.Lock();
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
    // The proxy sends its chunks here now: the holder hands it over at its next heartbeat.
    (void)client_->Eval(scripts::kAskHandOver,
                        {"1", HandOverKey(holder), redis_key, Ttl(options_.heartbeat_ttl * 10)});
    return absl::UnavailableError(absl::StrCat(
        Named(model, id), " is held in memory by replica ", holder,
        " (--sequence-durability=drain) and not handed over yet; it has been asked to: retry "
        "in a second"));
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
  {
    absl::MutexLock lock(&mu_);
    draining_ = true;
  }
  return Flush([](const Key&) { return true; });
}

RedisStore::DrainResult RedisStore::Flush(const std::function<bool(const Key&)>& pick) {
  struct Write {
    Key key;
    std::string redis_key;
    uint64_t stored_epoch = 0;
    uint64_t epoch = 0;
    std::string blob;
    absl::Duration max_idle;
  };
  std::vector<Write> writes;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, local] : local_) {
      if (!local.held || !pick(key)) continue;
      if (local.busy) {  // its Release writes it
        local.hand_over = true;
        continue;
      }
      writes.push_back({key, KeyOf(key.first, key.second), local.stored_epoch, local.epoch,
                        EncodeRecord({.model_version = local.version,
                                      .steps = local.steps,
                                      .epoch = local.epoch,
                                      .owner = local.owner,
                                      .client = local.client,
                                      .states = local.states}),
                        local.max_idle});
    }
    if (writes.empty()) return {};
    ++flushing_;  // Acquire waits: no chunk runs on a sequence being written
  }
  std::vector<bool> done(writes.size(), false);
  for (size_t i = 0; i < writes.size(); ++i) {
    const Write& w = writes[i];
    auto reply = client_->Eval(
        scripts::kStore, {"1", w.redis_key, std::to_string(w.stored_epoch), std::to_string(w.epoch),
                          w.blob, Ttl(w.max_idle), options_.replica_id});
    done[i] = reply.ok() && internal::IsInt(*reply, 1);
  }
  DrainResult result;
  absl::MutexLock lock(&mu_);
  --flushing_;
  for (size_t i = 0; i < writes.size(); ++i) {
    if (!done[i]) {
      ++result.failed;
      continue;
    }
    ++result.flushed;
    if (auto it = local_.find(writes[i].key); it != local_.end()) {
      it->second.held = false;
      it->second.hand_over = false;
      it->second.stored_epoch = writes[i].epoch;
      it->second.stored_at = options_.now();
    }
  }
  return result;
}

void RedisStore::RunErases(const std::vector<Erase>& erases) {
  for (const Erase& e : erases) {
    (void)client_->Eval(scripts::kErase, {"1", e.redis_key, std::to_string(e.epoch), e.holder});
  }
}

}  // namespace rnnserve::server::store
