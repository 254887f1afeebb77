#pragma once

// config.pbtxt -> DynamicBatcherOptions. docs/batching.md shows the fields as users write them.

#include <vector>

#include "absl/status/statusor.h"
#include "rnnserve/v1/model_config.pb.h"
#include "server/batching/batcher_options.h"

namespace rnnserve::server::batching {

// The ModelConfig.parameters key that sets max_computed_steps_ratio (a decimal number).
inline constexpr char kMaxComputedStepsRatioParameter[] = "max_computed_steps_ratio";

// True when config.pbtxt has a dynamic_batching block and max_batch_size > 0. Without either,
// each request runs alone (split into max_batch_size pieces when that is set).
bool WantsDynamicBatching(const v1::ModelConfig& config);

// The batcher's options for `config`, validated. The time axes come from the model's
// signature: one entry per input and per output, true where axis 1 is the time axis.
absl::StatusOr<DynamicBatcherOptions> BatcherOptionsFromConfig(const v1::ModelConfig& config,
                                                               std::vector<bool> input_time_axis,
                                                               std::vector<bool> output_time_axis);

}  // namespace rnnserve::server::batching
