#pragma once

// Leveled logging to stderr: one line per event, with a UTC timestamp and the level.

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rnnserve::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parses "debug", "info", "warning" or "error".
bool ParseLogLevel(absl::string_view text, LogLevel* level);
void SetLogLevel(LogLevel level);
void Log(LogLevel level, absl::string_view message);

inline void LogInfo(absl::string_view m) { Log(LogLevel::kInfo, m); }
inline void LogWarning(absl::string_view m) { Log(LogLevel::kWarning, m); }
inline void LogError(absl::string_view m) { Log(LogLevel::kError, m); }
inline void LogDebug(absl::string_view m) { Log(LogLevel::kDebug, m); }

// Spaces out repeats of one message under one key, so that what a client or a broken file can
// make happen over and over does not write a line each time. The first line of a key is let
// through; while the same message repeats, the next is let through `first` later, the one
// after twice that, and so on up to `max`, each saying how many were held back. A different
// message under the key starts over. At most `max_keys` keys are tracked (then all are
// forgotten at once), so the memory is bounded whatever the keys.
class RepeatLimiter {
 public:
  RepeatLimiter(absl::Duration first, absl::Duration max, size_t max_keys = 1024)
      : first_(first), max_(max), max_keys_(max_keys) {}
  // True: write the line now; *held_back is how many were held back since the last one.
  bool Allow(absl::string_view key, absl::string_view message, int64_t* held_back,
             absl::Time now = absl::Now()) ABSL_LOCKS_EXCLUDED(mu_);
  // The key's next message is let through at once.
  void Forget(absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct State {
    std::string message;
    absl::Time next;
    absl::Duration interval;
    int64_t held_back = 0;
  };
  const absl::Duration first_;
  const absl::Duration max_;
  const size_t max_keys_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, State> keys_ ABSL_GUARDED_BY(mu_);
};

// " (N similar lines held back)", or "" for none.
std::string HeldBackSuffix(int64_t held_back);

// Sends protobuf's own log lines (a request with invalid UTF-8 in a string field makes the
// parser write one per request) through Log at warning level, each distinct line at most once
// per 10 s at first and then less often (RepeatLimiter). Call once, before serving.
void RouteProtobufLog();

// Sends gRPC's own log lines (a failed TLS handshake, a malformed HTTP/2 frame: one line per
// bad connection) through Log, its errors at WARNING (a peer caused them), each source line of
// gRPC's at most once per 10 s at first and then less often, with a count of what was held
// back. Call once, before serving.
void RouteGrpcLog();

// The failure of a request's run on `model` v`version`: a server fault (grpc_status.h
// IsServerFault) at ERROR, spaced out per model and message (RepeatLimiter), what the client
// caused at DEBUG.
void LogRunFailure(const std::string& model, int64_t version, const absl::Status& status);

}  // namespace rnnserve::server
