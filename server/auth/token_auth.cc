#include "server/auth/token_auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rnnserve::server::auth {
namespace {

constexpr char kUnauthenticated[] = "authentication required: send a valid bearer token";

}  // namespace

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

std::vector<std::string> ShortTokenWarnings(const std::vector<std::string>& tokens,
                                            const std::string& flag) {
  std::vector<std::string> warnings;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i].size() >= kMinTokenChars) continue;
    warnings.push_back(absl::StrCat(flag, ": token ", i + 1, " of the file has ", tokens[i].size(),
                                    " characters; a short token is guessed: use at least ",
                                    kMinTokenChars, " (openssl rand -base64 32 makes one)"));
  }
  return warnings;
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
  std::vector<std::string> warnings = ShortTokenWarnings(inference, "--auth-token-file");
  for (std::string& w : ShortTokenWarnings(admin, "--admin-token-file")) {
    warnings.push_back(std::move(w));
  }
  auto authorizer = std::make_unique<TokenAuthorizer>(std::move(inference), std::move(admin));
  authorizer->warnings_ = std::move(warnings);
  return authorizer;
}

TokenAuthorizer::TokenAuthorizer(const std::vector<std::string>& inference_tokens,
                                 const std::vector<std::string>& admin_tokens)
    : inference_(HashAll(inference_tokens)), admin_(HashAll(admin_tokens)) {}

TokenAuthorizer::Digest TokenAuthorizer::Hash(std::string_view token) {
  Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), d.data());
  return d;
}

std::vector<TokenAuthorizer::Digest> TokenAuthorizer::HashAll(
    const std::vector<std::string>& tokens) {
  std::vector<Digest> digests;
  digests.reserve(tokens.size());
  for (const std::string& t : tokens) digests.push_back(Hash(t));
  return digests;
}

bool TokenAuthorizer::AnyEquals(const std::vector<Digest>& digests, const Digest& digest) {
  bool found = false;
  for (const Digest& d : digests) found |= CRYPTO_memcmp(d.data(), digest.data(), d.size()) == 0;
  return found;
}

grpc::Status TokenAuthorizer::Check(std::string_view header, Access access) const {
  // No tokens configured: every call is allowed, and no request pays for a hash.
  if (access == Access::kPublic || (inference_.empty() && admin_.empty())) {
    return grpc::Status::OK;
  }
  std::string_view token;
  const absl::string_view h(header.data(), header.size());
  if (h.size() > 7 && absl::StartsWithIgnoreCase(h, "bearer ")) {
    const absl::string_view t = absl::StripAsciiWhitespace(h.substr(7));
    token = std::string_view(t.data(), t.size());
  }
  const Digest digest = Hash(token);
  const bool admin = !token.empty() && AnyEquals(admin_, digest);
  const bool inference = !token.empty() && AnyEquals(inference_, digest);
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

grpc::Status TokenAuthorizer::Check(const grpc::ServerContextBase& context, Access access) const {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  const std::string_view header = it == metadata.end()
                                      ? std::string_view()
                                      : std::string_view(it->second.data(), it->second.size());
  return Check(header, access);
}

}  // namespace rnnserve::server::auth
