#pragma once

// Who a call comes from, for what is bound to a caller (KServe sequences) and for per-client
// quotas and fair shares (server/sequence_manager.h, fair_share.h): "token:<hash>" of the
// call's `authorization` metadata when it has one, otherwise "peer:<address>"
// (grpc::ServerContext::peer(), one per connection). The token itself is never stored, logged
// or returned: only a 64-bit hash of it, which is enough to tell callers apart and not enough
// to act as one.
//
// A sequence belongs to the identity (a connection, without a token); quotas and shares are
// counted by ShareKey, which drops a peer's port: the connections of one host without a token
// are one caller, so opening more connections buys no larger share.

#include <string>
#include "absl/strings/string_view.h"

#include <grpcpp/server_context.h>

namespace rnnserve::server::limits {

std::string CallerIdentity(const grpc::ServerContextBase& context);
// The same from the parts, for tests: `authorization` empty means none.
std::string CallerIdentity(absl::string_view authorization, absl::string_view peer);
// What a caller's quotas and shares are counted by: `identity` without a peer's port
// ("peer:ipv4:10.0.0.7:5000" -> "peer:ipv4:10.0.0.7", "peer:ipv6:[::1]:5000" ->
// "peer:ipv6:[::1]"); a token's identity and any other peer as they are.
std::string ShareKey(absl::string_view identity);

}  // namespace rnnserve::server::limits
