#include "server/auth/token_auth.h"

#include <fstream>
#include <functional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::server::auth {
namespace {

constexpr char kUnauthenticated[] = "authentication required: send a valid bearer token";

// Whether `given` is one of `tokens`; every token is compared, whatever matched.
bool AnyEquals(const std::vector<std::string>& tokens, std::string_view given) {
  bool found = false;
  for (const std::string& t : tokens) found |= ConstantTimeEquals(t, given);
  return found;
}

}  // namespace

std::string ClientIdentity(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    const std::string header(it->second.data(), it->second.size());
    return absl::StrCat("token:", absl::Hex(std::hash<std::string>{}(header)));
  }
  // The peer's address without its port: a client that opens a new connection (a new port) is
  // still the same client.
  const std::string peer = context.peer();  // "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555"
  const size_t port = peer.rfind(':');
  return absl::StrCat("peer:", port == std::string::npos || port < peer.find(':') + 1
                                   ? peer
                                   : peer.substr(0, port));
}

bool ConstantTimeEquals(std::string_view secret, std::string_view given) {
  // Every byte of the secret is looked at once; `given` is read modulo its length so that a
  // shorter or longer one takes the same time.
  unsigned diff = secret.size() ^ given.size();
  const size_t n = given.empty() ? 1 : given.size();
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char g = given.empty() ? 0 : static_cast<unsigned char>(given[i % n]);
    diff |= static_cast<unsigned char>(secret[i]) ^ g;
  }
  return diff == 0;
}

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read token file ", path));
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> tokens;
  for (absl::string_view line : absl::StrSplit(text.str(), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) tokens.emplace_back(line);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, " holds no token"));
  }
  return tokens;
}

absl::StatusOr<std::unique_ptr<TokenAuthorizer>> TokenAuthorizer::Create(
    const TokenAuthOptions& options) {
  std::vector<std::string> inference, admin;
  if (!options.inference_token_file.empty()) {
    auto t = ReadTokenFile(options.inference_token_file);
    if (!t.ok()) return t.status();
    inference = *std::move(t);
  }
  if (!options.admin_token_file.empty()) {
    auto t = ReadTokenFile(options.admin_token_file);
    if (!t.ok()) return t.status();
    admin = *std::move(t);
  }
  return std::make_unique<TokenAuthorizer>(std::move(inference), std::move(admin));
}

TokenAuthorizer::TokenAuthorizer(std::vector<std::string> inference_tokens,
                                 std::vector<std::string> admin_tokens)
    : inference_(std::move(inference_tokens)), admin_(std::move(admin_tokens)) {}

grpc::Status TokenAuthorizer::Check(std::string_view header, Access access) const {
  std::string_view token;
  const absl::string_view h(header.data(), header.size());
  if (h.size() > 7 && absl::StartsWithIgnoreCase(h, "bearer ")) {
    const absl::string_view t = absl::StripAsciiWhitespace(h.substr(7));
    token = std::string_view(t.data(), t.size());
  }
  const bool admin = !token.empty() && AnyEquals(admin_, token);
  const bool inference = !token.empty() && AnyEquals(inference_, token);
  if (access == Access::kAdmin && !admin_.empty()) {
    if (admin) return grpc::Status::OK;
    if (inference) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "this call changes what is served and needs an admin token");
    }
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kUnauthenticated);
  }
  if (inference_.empty() || admin || inference) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kUnauthenticated);
}

grpc::Status TokenAuthorizer::Check(const grpc::ServerContext& context, Access access) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string_view header = it == metadata.end()
                                      ? std::string_view()
                                      : std::string_view(it->second.data(), it->second.size());
  return Check(header, access);
}

}  // namespace rnnserve::server::auth
