#include "server/batching/batcher_options.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rnnserve::server::batching {

absl::Status ValidateOptions(const DynamicBatcherOptions& o) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model '", o.model_name, "': ", what));
  };
  if (o.max_batch_size <= 0) {
    return bad(absl::StrCat("max_batch_size must be positive for dynamic batching; was ",
                            o.max_batch_size));
  }
  for (int p : o.preferred_batch_sizes) {
    if (p < 1 || p > o.max_batch_size) {
      return bad(absl::StrCat("dynamic_batching.preferred_batch_size must be in [1, ",
                              o.max_batch_size, "] (max_batch_size); was ", p));
    }
  }
  if (o.max_queue_delay_us < 0) {
    return bad(absl::StrCat("dynamic_batching.max_queue_delay_microseconds must be >= 0; was ",
                            o.max_queue_delay_us));
  }
  if (o.max_queue_size < 0) {
    return bad(
        absl::StrCat("dynamic_batching.max_queue_size must be >= 0; was ", o.max_queue_size));
  }
  if (o.default_timeout_us < 0) {
    return bad(absl::StrCat("dynamic_batching.default_timeout_microseconds must be >= 0; was ",
                            o.default_timeout_us));
  }
  if (o.priority_levels < 0) {
    return bad(
        absl::StrCat("dynamic_batching.priority_levels must be >= 0; was ", o.priority_levels));
  }
  if (o.priority_levels == 0 && o.default_priority_level != 0) {
    return bad(absl::StrCat(
        "dynamic_batching.default_priority_level must be 0 when priority_levels is 0; was ",
        o.default_priority_level));
  }
  if (o.priority_levels > 0 &&
      (o.default_priority_level < 1 || o.default_priority_level > o.priority_levels)) {
    return bad(absl::StrCat("dynamic_batching.default_priority_level must be in [1, ",
                            o.priority_levels, "] (priority_levels); was ",
                            o.default_priority_level));
  }
  if (!(o.max_computed_steps_ratio == 0 || o.max_computed_steps_ratio >= 1)) {
    return bad(absl::StrCat("max_computed_steps_ratio must be 0 (no bound) or >= 1; was ",
                            o.max_computed_steps_ratio));
  }
  if (o.input_time_axis.empty()) {
    return bad("the batcher needs one input_time_axis entry per model input; got none");
  }
  return absl::OkStatus();
}

std::string DescribeForming(const DynamicBatcherOptions& o) {
  std::string out = absl::StrCat("dynamic batching up to ", o.max_batch_size, " sequences, ");
  if (!o.wait_when_idle) {
    absl::StrAppend(&out, "work-conserving (a free instance takes what is queued at once)");
    if (o.max_queue_delay_us > 0 || !o.preferred_batch_sizes.empty()) {
      absl::StrAppend(&out,
                      "; max_queue_delay_microseconds and preferred_batch_size are unused "
                      "without wait_for_delay_when_idle");
    }
    return out;
  }
  if (o.max_queue_delay_us == 0) {
    absl::StrAppend(&out, "a free instance takes what is queued at once (queue delay 0)");
    return out;
  }
  absl::StrAppend(&out, "a free instance waits up to ", o.max_queue_delay_us,
                  " us for a full batch");
  if (!o.preferred_batch_sizes.empty()) {
    absl::StrAppend(&out, " or one of ", absl::StrJoin(o.preferred_batch_sizes, ", "),
                    " sequences");
  }
  return out;
}

}  // namespace rnnserve::server::batching
