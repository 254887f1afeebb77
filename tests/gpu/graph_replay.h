#pragma once

// Runs what a test enqueues on a stream from a CUDA graph instead: captured once, replayed twice.

#include <cuda_runtime_api.h>

#include <functional>

#include "absl/status/status.h"

namespace rnnserve::testing {

// Captures `enqueue` on `stream` into a graph, launches it twice and waits for the stream; the
// status of `enqueue`, or what failed in the capture or the launches.
inline absl::Status ReplayTwice(cudaStream_t stream, const std::function<absl::Status()>& enqueue) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    return absl::InternalError("cudaStreamBeginCapture");
  }
  const absl::Status s = enqueue();
  if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || !s.ok()) {
    if (graph) cudaGraphDestroy(graph);
    return s.ok() ? absl::InternalError("cudaStreamEndCapture") : s;
  }
  const bool ok = cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess &&
                  cudaGraphLaunch(exec, stream) == cudaSuccess &&
                  cudaGraphLaunch(exec, stream) == cudaSuccess;
  cudaStreamSynchronize(stream);
  if (exec) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ok ? absl::OkStatus() : absl::InternalError("cudaGraphLaunch");
}

}  // namespace rnnserve::testing
