#pragma once

// KServe's ModelStatistics of one model version, as its metrics tallied them
// (server/metrics/inference_statistics.h says what each duration measures). They count every
// front end's requests, as Triton's do. Queue keeps its count and time; a version that was
// never called, or is not loaded, reports zeros.

#include <cstdint>
#include <string>

#include "inference/grpc_service.pb.h"
#include "server/metrics/inference_statistics.h"

namespace rnnserve::server::kserve {

void FillStatistics(const std::string& model, int64_t version,
                    const metrics::InferenceStatistics& stats, inference::ModelStatistics* out);

}  // namespace rnnserve::server::kserve
