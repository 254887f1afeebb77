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
// A missing or unknown token is UNAUTHENTICATED with one message whatever the reason. Tokens
// are compared in time that depends only on the configured tokens' lengths, never logged, and
// never quoted in errors.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace rnnserve::server::auth {

enum class Access {
  kInference,  // predict, evaluate, streams, metadata, listing
  kAdmin,      // load and unload models
};

struct TokenAuthOptions {
  std::string inference_token_file;  // empty: inference needs no token
  std::string admin_token_file;      // empty: admin RPCs take what inference takes
};

// The tokens of a file: INVALID_ARGUMENT when it cannot be read or holds none.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

class TokenAuthorizer {
 public:
  static absl::StatusOr<std::unique_ptr<TokenAuthorizer>> Create(const TokenAuthOptions& options);
  TokenAuthorizer(std::vector<std::string> inference_tokens, std::vector<std::string> admin_tokens);

  // OK, UNAUTHENTICATED or PERMISSION_DENIED for a call with `authorization` metadata
  // `header` (empty when the call has none).
  grpc::Status Check(std::string_view header, Access access) const;
  // The same for a call's client metadata.
  grpc::Status Check(const grpc::ServerContext& context, Access access) const;

  // Whether any token is configured.
  bool enabled() const { return !inference_.empty() || !admin_.empty(); }

 private:
  const std::vector<std::string> inference_;
  const std::vector<std::string> admin_;
};

// Check() on a possibly null authorizer: null lets every call through.
inline grpc::Status Authorize(const TokenAuthorizer* authorizer, const grpc::ServerContext& context,
                              Access access) {
  return authorizer == nullptr ? grpc::Status::OK : authorizer->Check(context, access);
}

// Who a call comes from, for binding server-held state (stateful sequences) to it: its bearer
// token when it sends one (as a hash: the token itself is not kept), else the address it calls
// from (ServerContext::peer() without the port, so that a new connection is the same client).
std::string ClientIdentity(const grpc::ServerContext& context);

// Equal strings, in time that depends on `secret`'s length only.
bool ConstantTimeEquals(std::string_view secret, std::string_view given);

}  // namespace rnnserve::server::auth
