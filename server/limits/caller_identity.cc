#include "server/limits/caller_identity.h"

#include <cstdint>

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

}  // namespace rnnserve::server::limits
