#include "server/client_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server {

std::string QuoteClientText(std::string_view text, size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  std::string out = absl::CHexEscape(absl::string_view(text.data(), cut ? max_bytes : text.size()));
  if (cut) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

absl::Status ValidateModelName(std::string_view name) {
  constexpr size_t kMaxName = 128;
  bool ok = !name.empty() && name.size() <= kMaxName && name[0] != '.';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '.' || c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model name '", QuoteClientText(name),
                   "' is not valid: 1 to 128 characters of A-Z a-z 0-9 _ . -, not starting "
                   "with '.'"));
}

std::string BoundedErrorMessage(std::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  return absl::StrCat(absl::string_view(message.data(), max_bytes), "... (message cut; ",
                      message.size(), " bytes)");
}

}  // namespace rnnserve::server
