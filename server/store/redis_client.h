#pragma once

// A small, thread-safe Redis client over hiredis (Debian 12: libhiredis 0.14, synchronous
// API, no TLS) that pipelines the commands of concurrent callers (group commit): a caller's
// command joins a queue; a caller that finds fewer than Options::pipelines batches in flight
// takes everything queued and sends it as one batch on one connection (all the commands
// written at once, then the replies read in order), then hands each caller its reply.
// Under load, Redis and this process pay one read, one write and one wake-up per batch instead
// of per command; a lone command is sent at once (never waits for company). Connections are
// made on demand, kept (one per pipeline) and dropped after an error (the next batch connects
// again). Every failure is UNAVAILABLE
// naming the endpoint and what went wrong, so that a chunk that needs the store while Redis is
// down is refused with a clear message, and works again once Redis is back.
//
// TLS: hiredis 0.14 has none. Put a TLS tunnel beside the server (stunnel, or a sidecar) that
// listens on loopback and connects to Redis over TLS, and point --sequence-store at the
// tunnel (docs/scale-out.md).

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct redisContext;

namespace rnnserve::server::store {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  int db = 0;                    // SELECTed on each new connection
  std::string ToString() const;  // redis://host:port/db
};
// "redis://HOST:PORT[/DB]" (PORT 1..65535, DB >= 0); INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<RedisEndpoint> ParseRedisUrl(absl::string_view url);

// A reply, copied out of hiredis's.
struct RedisReply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray };
  Type type = Type::kNil;
  int64_t integer = 0;
  std::string str;  // kString, kStatus
  std::vector<RedisReply> elements;
};

class RedisClient {
 public:
  struct Options {
    RedisEndpoint endpoint;
    std::string password;                               // AUTH on each new connection; empty: none
    absl::Duration connect_timeout = absl::Seconds(1);  // must be positive
    absl::Duration command_timeout = absl::Seconds(2);  // must be positive
    // Batches in flight at once, each on its own connection; more callers than that queue and
    // go in the next batch. Must be positive.
    int pipelines = 4;
  };
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(Options options);
  ~RedisClient();

  // One command, binary-safe arguments. A Redis error reply is UNAVAILABLE with its text.
  absl::StatusOr<RedisReply> Command(const std::vector<absl::string_view>& args);
  // A Lua script (EVAL's arguments after the script: numkeys, keys, args), sent as EVALSHA of
  // the script's SHA1 once Redis has it (SCRIPT LOAD on first use), and loaded again after
  // NOSCRIPT (a Redis that restarted). `script` must outlive the client (a string constant):
  // it names the script in the cache.
  absl::StatusOr<RedisReply> Eval(const char* script, const std::vector<absl::string_view>& args);
  const RedisEndpoint& endpoint() const { return options_.endpoint; }

 private:
  explicit RedisClient(Options options) : options_(std::move(options)) {}
  absl::StatusOr<redisContext*> Connect();
  // One caller's command in the queue; `reply` is written by the batch's sender before `done`
  // is set under mu_.
  struct Pending {
    const std::vector<absl::string_view>* args;
    absl::StatusOr<RedisReply> reply;
    bool done = false;
  };
  // Sends `batch` on `c` (null: a new connection) and fills every reply; returns the
  // connection to keep, or null (it broke).
  redisContext* RunBatch(redisContext* c, const std::vector<Pending*>& batch);
  // Writes batch[*answered..] on `c` and reads their replies; false (with *why) when the
  // connection broke, *answered telling how many got a reply.
  bool SendAll(redisContext* c, const std::vector<Pending*>& batch, size_t* answered,
               std::string* why);
  // Command's wait: its reply came, or it may send a batch.
  struct Waiter {
    RedisClient* client;
    Pending* me;
  };
  static bool MayGo(Waiter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  absl::Status Unavailable(absl::string_view what) const;

  const Options options_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);         // at most `pipelines`
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);              // waiting for a sender
  int senders_ ABSL_GUARDED_BY(mu_) = 0;                         // batches in flight
  std::map<const char*, std::string> sha_ ABSL_GUARDED_BY(mu_);  // script -> its SHA1 in Redis
};

}  // namespace rnnserve::server::store
