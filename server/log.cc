#include "server/log.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "server/grpc_status.h"

namespace rnnserve::server {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

bool ParseLogLevel(absl::string_view text, LogLevel* level) {
  if (text == "debug")
    *level = LogLevel::kDebug;
  else if (text == "info")
    *level = LogLevel::kInfo;
  else if (text == "warning")
    *level = LogLevel::kWarning;
  else if (text == "error")
    *level = LogLevel::kError;
  else
    return false;
  return true;
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void Log(LogLevel level, absl::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  const std::string now =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::lock_guard<std::mutex> lock(g_mu);
  std::fprintf(stderr, "%s %-7s %.*s\n", now.c_str(), Name(level), static_cast<int>(message.size()),
               message.data());
  std::fflush(stderr);
}

bool RepeatLimiter::Allow(absl::string_view key, absl::string_view message, int64_t* held_back,
                          absl::Time now) {
  absl::MutexLock lock(&mu_);
  *held_back = 0;
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= max_keys_) keys_.clear();
    keys_.emplace(std::string(key), State{std::string(message), now + first_, first_, 0});
    return true;
  }
  State& s = it->second;
  if (s.message != message) {
    *held_back = s.held_back;
    s = State{std::string(message), now + first_, first_, 0};
    return true;
  }
  if (now < s.next) {
    ++s.held_back;
    return false;
  }
  *held_back = s.held_back;
  s.held_back = 0;
  s.interval = std::min(s.interval * 2, max_);
  s.next = now + s.interval;
  return true;
}

void RepeatLimiter::Forget(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  if (auto it = keys_.find(key); it != keys_.end()) keys_.erase(it);
}

std::string HeldBackSuffix(int64_t held_back) {
  if (held_back <= 0) return "";
  return absl::StrCat(" (", held_back, " similar line", held_back == 1 ? "" : "s", " held back)");
}

namespace {

void ProtobufLogLine(google::protobuf::LogLevel level, const char* file, int line,
                     const std::string& message) {
  static RepeatLimiter* const limiter =
      new RepeatLimiter(absl::Seconds(10), absl::Minutes(10), /*max_keys=*/256);
  int64_t held_back = 0;
  if (!limiter->Allow(message, message, &held_back)) return;
  Log(level >= google::protobuf::LOGLEVEL_ERROR ? LogLevel::kWarning : LogLevel::kInfo,
      absl::StrCat("protobuf: ", message, HeldBackSuffix(held_back)));
  (void)file;
  (void)line;
}

void GrpcLogLine(gpr_log_func_args* args) {
  static RepeatLimiter* const limiter =
      new RepeatLimiter(absl::Seconds(10), absl::Minutes(10), /*max_keys=*/256);
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kWarning
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  if (static_cast<int>(level) < g_level.load()) return;
  // Keyed by gRPC's source line: the same failure from many peers differs only in addresses.
  const std::string key = absl::StrCat(args->file != nullptr ? args->file : "", ":", args->line);
  int64_t held_back = 0;
  if (!limiter->Allow(key, key, &held_back)) return;
  Log(level, absl::StrCat("grpc: ", args->message != nullptr ? args->message : "",
                          HeldBackSuffix(held_back)));
}

}  // namespace

void RouteProtobufLog() { google::protobuf::SetLogHandler(&ProtobufLogLine); }

void RouteGrpcLog() { gpr_set_log_function(&GrpcLogLine); }

void LogRunFailure(const std::string& model, int64_t version, const absl::Status& status) {
  const std::string line = absl::StrCat("model ", model, " v", version, ": ", status.message());
  if (!IsServerFault(status)) return LogDebug(line);
  static RepeatLimiter* const limiter =
      new RepeatLimiter(absl::Seconds(10), absl::Minutes(10), /*max_keys=*/1024);
  int64_t held_back = 0;
  if (limiter->Allow(absl::StrCat(model, "/", version), line, &held_back)) {
    LogError(line + HeldBackSuffix(held_back));
  }
}

}  // namespace rnnserve::server
