#pragma once

// Leveled logging to stderr: one line per event, with a UTC timestamp and the level.

#include <string>
#include "absl/strings/string_view.h"

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

}  // namespace rnnserve::server
