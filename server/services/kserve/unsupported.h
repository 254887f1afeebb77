#pragma once

// Triton's extensions that rnnserve does not serve, and what their callers should use instead.
// Both transports answer them: gRPC with UNIMPLEMENTED (kserve_service.h), HTTP with 501
// (rest_routes.h), each with Unsupported's message.

#include <string>

#include "absl/status/status.h"

namespace rnnserve::server::kserve {

enum class Extension {
  kSystemSharedMemory,  // /v2/systemsharedmemory, SystemSharedMemory{Status,Register,Unregister}
  kCudaSharedMemory,    // /v2/cudasharedmemory, CudaSharedMemory{Status,Register,Unregister}
  kTrace,               // /v2/trace/setting, TraceSetting
  kLogSettings,         // /v2/logging, LogSettings
};

// UNIMPLEMENTED naming the extension (`request`: the RPC or path asked for) and what to use.
absl::Status Unsupported(Extension extension, const std::string& request);

}  // namespace rnnserve::server::kserve
