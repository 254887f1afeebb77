// Triton's extensions that rnnserve does not serve: shared memory, tracing and log settings.

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"
#include "server/services/kserve/kserve_service.h"
#include "server/services/kserve/unsupported.h"

namespace rnnserve::server::kserve {
namespace {

// The access table has checked the caller (auth/access_control.h); then the refusal.
grpc::Status Refuse(const grpc::ServerContext& context, Extension extension,
                    const std::string& method) {
  if (grpc::Status a = auth::Verdict(context); !a.ok()) return a;
  return ToGrpc(Unsupported(extension, "inference.GRPCInferenceService/" + method));
}

}  // namespace

absl::Status Unsupported(Extension extension, const std::string& request) {
  const char* what = "";
  switch (extension) {
    case Extension::kSystemSharedMemory:
      what =
          "rnnserve does not read or write tensors in system shared memory; send inputs in "
          "raw_input_contents (gRPC) or with the binary tensor data extension (HTTP), and ask "
          "for outputs without shared-memory parameters (perf_analyzer: leave out "
          "--shared-memory)";
      break;
    case Extension::kCudaSharedMemory:
      what =
          "rnnserve does not read or write tensors in CUDA shared memory; send inputs in "
          "raw_input_contents (gRPC) or with the binary tensor data extension (HTTP): the GPU "
          "engine copies them to the device itself (perf_analyzer: leave out --shared-memory)";
      break;
    case Extension::kTrace:
      what =
          "rnnserve has no request tracing; per-model queue, compute and request latencies are "
          "on the Prometheus endpoint (/metrics) and in ModelStatistics";
      break;
    case Extension::kLogSettings:
      what =
          "rnnserve's logging is set when it starts (--log-level) and cannot be changed while "
          "it runs";
      break;
  }
  return absl::UnimplementedError(absl::StrCat(request, " is not served: ", what));
}

grpc::Status KServeService::SystemSharedMemoryStatus(
    grpc::ServerContext* context, const inference::SystemSharedMemoryStatusRequest*,
    inference::SystemSharedMemoryStatusResponse*) {
  return Refuse(*context, Extension::kSystemSharedMemory, "SystemSharedMemoryStatus");
}

grpc::Status KServeService::SystemSharedMemoryRegister(
    grpc::ServerContext* context, const inference::SystemSharedMemoryRegisterRequest*,
    inference::SystemSharedMemoryRegisterResponse*) {
  return Refuse(*context, Extension::kSystemSharedMemory, "SystemSharedMemoryRegister");
}

grpc::Status KServeService::SystemSharedMemoryUnregister(
    grpc::ServerContext* context, const inference::SystemSharedMemoryUnregisterRequest*,
    inference::SystemSharedMemoryUnregisterResponse*) {
  return Refuse(*context, Extension::kSystemSharedMemory, "SystemSharedMemoryUnregister");
}

grpc::Status KServeService::CudaSharedMemoryStatus(grpc::ServerContext* context,
                                                   const inference::CudaSharedMemoryStatusRequest*,
                                                   inference::CudaSharedMemoryStatusResponse*) {
  return Refuse(*context, Extension::kCudaSharedMemory, "CudaSharedMemoryStatus");
}

grpc::Status KServeService::CudaSharedMemoryRegister(
    grpc::ServerContext* context, const inference::CudaSharedMemoryRegisterRequest*,
    inference::CudaSharedMemoryRegisterResponse*) {
  return Refuse(*context, Extension::kCudaSharedMemory, "CudaSharedMemoryRegister");
}

grpc::Status KServeService::CudaSharedMemoryUnregister(
    grpc::ServerContext* context, const inference::CudaSharedMemoryUnregisterRequest*,
    inference::CudaSharedMemoryUnregisterResponse*) {
  return Refuse(*context, Extension::kCudaSharedMemory, "CudaSharedMemoryUnregister");
}

grpc::Status KServeService::TraceSetting(grpc::ServerContext* context,
                                         const inference::TraceSettingRequest*,
                                         inference::TraceSettingResponse*) {
  return Refuse(*context, Extension::kTrace, "TraceSetting");
}

grpc::Status KServeService::LogSettings(grpc::ServerContext* context,
                                        const inference::LogSettingsRequest*,
                                        inference::LogSettingsResponse*) {
  return Refuse(*context, Extension::kLogSettings, "LogSettings");
}

}  // namespace rnnserve::server::kserve
