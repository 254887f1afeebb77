#pragma once

// A small, thread-safe Redis client over hiredis (Debian 12: libhiredis 0.14, synchronous
// API, no TLS): a pool of connections, each used by one command at a time, made on demand and
// dropped after an error (the next command connects again). Size the pool to the threads that
// send commands at once (main.cc: --grpc-max-threads): a command that finds no idle connection
// connects, and one that finds the pool full closes its connection after the command, so an
// undersized pool pays a TCP connect per command under load. Every failure is UNAVAILABLE
// naming the endpoint and what went wrong, so that a chunk that needs the store while Redis is
// down is refused with a clear message, and works again once Redis is back.
//
// TLS: hiredis 0.14 has none. Put a TLS tunnel beside the server (stunnel, or a sidecar) that
// listens on loopback and connects to Redis over TLS, and point --sequence-store at the
// tunnel (docs/scale-out.md).

#include <cstdint>
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
    int max_idle_connections = 256;  // kept open between commands; must be positive
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
  // The command on `c`, which it then keeps in the pool or frees. CANCELLED: no reply (the
  // connection is gone).
  absl::StatusOr<RedisReply> Send(redisContext* c, const std::vector<absl::string_view>& args);
  absl::Status Unavailable(absl::string_view what) const;

  const Options options_;
  absl::Mutex mu_;
  std::vector<redisContext*> idle_ ABSL_GUARDED_BY(mu_);
  std::map<const char*, std::string> sha_ ABSL_GUARDED_BY(mu_);  // script -> its SHA1 in Redis
};

}  // namespace rnnserve::server::store
