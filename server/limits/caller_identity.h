#pragma once

// Who a call comes from, for what is bound to a caller (KServe sequences) and for per-client
// quotas (server/sequence_manager.h): "token:<hash>" of the call's `authorization` metadata
// when it has one, otherwise "peer:<address>" (grpc::ServerContext::peer(), one per
// connection). The token itself is never stored, logged or returned: only a 64-bit hash of
// it, which is enough to tell callers apart and not enough to act as one.

#include <string>
#include "absl/strings/string_view.h"

#include <grpcpp/server_context.h>

namespace rnnserve::server::limits {

std::string CallerIdentity(const grpc::ServerContextBase& context);
// The same from the parts, for tests: `authorization` empty means none.
std::string CallerIdentity(absl::string_view authorization, absl::string_view peer);

}  // namespace rnnserve::server::limits
