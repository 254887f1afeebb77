#pragma once

// Helpers shared by redis_store.cc and redis_store_drain.cc (not part of the store's API).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/store/redis_client.h"

namespace rnnserve::server::store::internal {

// A TTL in milliseconds, at least 1, as PEXPIRE takes it.
std::string Ttl(absl::Duration max_idle);
// "sequence <id> of model '<model>'".
std::string Named(const std::string& model, uint64_t id);
// INVALID_ARGUMENT: the sequence is not live.
absl::Status NotLive(const std::string& model, uint64_t id);
// Another owner's sequence: a chunk is told what it would be told of an id that is not live,
// whether or not a chunk is in flight, so nothing shows that the id is live; a start is told
// only that the id is in use (it cannot start it), not whose.
absl::Status OtherOwner(const std::string& model, uint64_t id, bool start);
bool IsInt(const RedisReply& r, int64_t v);

}  // namespace rnnserve::server::store::internal
