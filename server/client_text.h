#pragma once

// Client input quoted in error messages: short and printable, whatever the client sent, so
// that an error always fits the client's header limit (gRPC carries the message in a trailer,
// 8 KiB by default) and a NUL or control byte cannot corrupt a log line.

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace rnnserve::server {

// `text` with non-printable bytes escaped (\x00), cut after `max_bytes` bytes of input with
// "... (N bytes)" appended when it was longer.
std::string QuoteClientText(std::string_view text, size_t max_bytes = 128);

// Model names: 1 to 128 bytes of [A-Za-z0-9_.-], not starting with '.'. INVALID_ARGUMENT
// quoting the name (QuoteClientText) otherwise.
absl::Status ValidateModelName(std::string_view name);

// An error message cut to what a client can receive: at most `max_bytes`, with a note of the
// full length when cut.
std::string BoundedErrorMessage(std::string_view message, size_t max_bytes = 4096);

}  // namespace rnnserve::server
