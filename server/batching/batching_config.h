#pragma once

// config.pbtxt -> DynamicBatcherOptions. docs/batching.md shows the fields as users write them.

#include <vector>

#include "absl/status/statusor.h"
#include "rnnserve/v1/model_config.pb.h"
#include "server/batching/batcher_options.h"

namespace rnnserve::server::batching {

// The ModelConfig.parameters key that sets max_computed_steps_ratio (a decimal number).
inline constexpr char kMaxComputedStepsRatioParameter[] = "max_computed_steps_ratio";
// Its default for models on GPU instances, where config.pbtxt does not set it (elsewhere
// DynamicBatcherOptions' 1.1). A GPU batch's time grows far slower with its rows than its
// computed steps do, so keeping lengths apart costs the GPU most of its throughput on mixed
// lengths: on an H100, LSTM(256) with lengths uniform in 10..500, the bound 1.1 served about 1.1k
// sequences/s in batches of one while 4 served 9.8k at p50 3.6 ms, with the same 1.5 ms p50 at
// 500-1000 sequences/s (bench/results/cellular-gpu-h100-2026-11-26.md).
inline constexpr double kGpuMaxComputedStepsRatio = 4.0;

// True when config.pbtxt has a dynamic_batching block and max_batch_size > 0. Without either,
// each request runs alone (split into max_batch_size pieces when that is set).
bool WantsDynamicBatching(const v1::ModelConfig& config);

// The batcher's options for `config`, validated. The time axes come from the model's
// signature: one entry per input and per output, true where axis 1 is the time axis.
absl::StatusOr<DynamicBatcherOptions> BatcherOptionsFromConfig(const v1::ModelConfig& config,
                                                               std::vector<bool> input_time_axis,
                                                               std::vector<bool> output_time_axis);

}  // namespace rnnserve::server::batching
