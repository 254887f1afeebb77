#include "server/batching/batching_config.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rnnserve::server::batching {
namespace {

absl::StatusOr<int64_t> ToInt64(uint64_t value, const char* field, const std::string& model) {
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "': dynamic_batching.", field,
                                                   " must be < 2^63; was ", value));
  }
  return static_cast<int64_t>(value);
}

absl::StatusOr<int> ToInt(uint32_t value, const char* field, const std::string& model) {
  if (value > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "': dynamic_batching.", field,
                                                   " must be < 2^31; was ", value));
  }
  return static_cast<int>(value);
}

}  // namespace

bool WantsDynamicBatching(const v1::ModelConfig& config) {
  return config.has_dynamic_batching() && config.max_batch_size() > 0;
}

absl::StatusOr<DynamicBatcherOptions> BatcherOptionsFromConfig(const v1::ModelConfig& config,
                                                               std::vector<bool> input_time_axis,
                                                               std::vector<bool> output_time_axis) {
  const v1::ModelDynamicBatching& db = config.dynamic_batching();
  DynamicBatcherOptions o;
  o.model_name = config.name();
  o.max_batch_size = config.max_batch_size();
  o.preferred_batch_sizes.assign(db.preferred_batch_size().begin(),
                                 db.preferred_batch_size().end());
  auto delay =
      ToInt64(db.max_queue_delay_microseconds(), "max_queue_delay_microseconds", o.model_name);
  if (!delay.ok()) return delay.status();
  o.max_queue_delay_us = *delay;
  o.wait_when_idle = db.wait_for_delay_when_idle();
  // The servable's callers block until their answer anyway: they may as well run it.
  o.run_on_caller_when_idle = !o.wait_when_idle;
  o.max_queue_size = db.max_queue_size();
  auto timeout =
      ToInt64(db.default_timeout_microseconds(), "default_timeout_microseconds", o.model_name);
  if (!timeout.ok()) return timeout.status();
  o.default_timeout_us = *timeout;
  auto levels = ToInt(db.priority_levels(), "priority_levels", o.model_name);
  if (!levels.ok()) return levels.status();
  o.priority_levels = *levels;
  auto level = ToInt(db.default_priority_level(), "default_priority_level", o.model_name);
  if (!level.ok()) return level.status();
  o.default_priority_level = *level;
  if (auto it = config.parameters().find(kMaxComputedStepsRatioParameter);
      it != config.parameters().end()) {
    double ratio = 0;
    if (!absl::SimpleAtod(it->second, &ratio)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", o.model_name, "': parameters ", kMaxComputedStepsRatioParameter,
                       " must be a number (0, or >= 1); was '", it->second, "'"));
    }
    o.max_computed_steps_ratio = ratio;
  }
  o.input_time_axis = std::move(input_time_axis);
  o.output_time_axis = std::move(output_time_axis);
  if (auto s = ValidateOptions(o); !s.ok()) return s;
  return o;
}

}  // namespace rnnserve::server::batching
