#include "server/limits/caller_identity.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server::limits {
namespace {

// FNV-1a, 64-bit: stable across runs and builds (absl::Hash is salted per process).
uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string CallerIdentity(absl::string_view authorization, absl::string_view peer) {
  if (!authorization.empty()) return absl::StrCat("token:", absl::Hex(Fnv1a(authorization)));
  return absl::StrCat("peer:", peer);
}

std::string CallerIdentity(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const absl::string_view token = it == metadata.end()
                                      ? absl::string_view()
                                      : absl::string_view(it->second.data(), it->second.size());
  return CallerIdentity(token, context.peer());
}

std::string ShareKey(absl::string_view identity) {
  if (!absl::StartsWith(identity, "peer:ipv4:") && !absl::StartsWith(identity, "peer:ipv6:")) {
    return std::string(identity);
  }
  const size_t colon = identity.rfind(':');
  const absl::string_view port = identity.substr(colon + 1);
  if (colon < 10 || port.empty() ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::string(identity);
  }
  return std::string(identity.substr(0, colon));
}

}  // namespace rnnserve::server::limits
