#pragma once

// Bearer tokens: who may call what.
//
// Two token files, each one token a line (blank lines and surrounding whitespace ignored):
//   inference tokens (--auth-token-file): with any, every RPC but health and KServe's
//     ServerLive/ServerReady needs `authorization: Bearer <token>` holding one of them (or an
//     admin token).
//   admin tokens (--admin-token-file): with any, the RPCs that change what is served (LoadModel,
//     UnloadModel) need one of them; an inference token there is PERMISSION_DENIED. Without an
//     admin file those RPCs take what inference takes.
// A missing or unknown token is UNAUTHENTICATED with one message whatever the reason. Only the
// tokens' SHA-256 digests are kept; a call's token is hashed and compared with every digest in
// constant time, so neither its content nor its length shows in how long the check takes.
// Tokens are never logged and never quoted in errors.

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace rnnserve::server::auth {

enum class Access {
  kPublic,     // liveness and readiness: no token
  kInference,  // predict, evaluate, streams, metadata, listing
  kAdmin,      // load and unload models
};

struct TokenAuthOptions {
  std::string inference_token_file;  // empty: inference needs no token
  std::string admin_token_file;      // empty: admin RPCs take what inference takes
};

// The tokens of a file: INVALID_ARGUMENT when it cannot be read or holds none.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

// Tokens shorter than this are accepted with a startup warning: a short token is guessed.
inline constexpr size_t kMinTokenChars = 16;
// A warning for each token of `tokens` (read from `flag`'s file) shorter than kMinTokenChars,
// naming its line among the tokens and its length, never the token.
std::vector<std::string> ShortTokenWarnings(const std::vector<std::string>& tokens,
                                            const std::string& flag);

class TokenAuthorizer {
 public:
  static absl::StatusOr<std::unique_ptr<TokenAuthorizer>> Create(const TokenAuthOptions& options);
  // Keeps the tokens' digests only.
  TokenAuthorizer(const std::vector<std::string>& inference_tokens,
                  const std::vector<std::string>& admin_tokens);

  // OK, UNAUTHENTICATED or PERMISSION_DENIED for a call with `authorization` metadata
  // `header` (empty when the call has none).
  grpc::Status Check(std::string_view header, Access access) const;
  // The same for a call's client metadata.
  grpc::Status Check(const grpc::ServerContextBase& context, Access access) const;

  // Whether any token is configured.
  bool enabled() const { return !inference_.empty() || !admin_.empty(); }
  // Whether admin tokens are configured (--admin-token-file).
  bool has_admin_tokens() const { return !admin_.empty(); }
  // What Create() found weak in the files (ShortTokenWarnings), for the startup log.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  using Digest = std::array<unsigned char, 32>;  // SHA-256
  static Digest Hash(std::string_view token);
  static std::vector<Digest> HashAll(const std::vector<std::string>& tokens);
  // Whether `digest` is one of `digests`; every one is compared, whatever matched.
  static bool AnyEquals(const std::vector<Digest>& digests, const Digest& digest);

  const std::vector<Digest> inference_;
  const std::vector<Digest> admin_;
  std::vector<std::string> warnings_;  // set by Create()
};

}  // namespace rnnserve::server::auth
