#include "server/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

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

}  // namespace rnnserve::server
