#pragma once

// The dynamic batcher's settings, with their defaults and what 0 means. config.pbtxt spells
// them as docs/batching.md shows; batching_config.h does the mapping.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rnnserve::server::batching {

struct DynamicBatcherOptions {
  // Names the model in error messages.
  std::string model_name = {};
  // Most sequences in one engine call. Must be positive. A request with more sequences is split
  // across batches and its rows reassembled in order.
  int max_batch_size = 0;
  // With wait_when_idle: batch sizes formed as soon as the queue holds them, without waiting
  // for the delay (the largest one that fits is formed). Each in [1, max_batch_size]. Empty:
  // only max_batch_size and the delay form batches.
  std::vector<int> preferred_batch_sizes = {};
  // false: work-conserving. A free instance forms a batch from what is queued at once (up to
  // max_batch_size, within the step budget); requests wait only while every instance is busy,
  // and then join one batch. preferred_batch_sizes and max_queue_delay_us play no part.
  // true: a free instance waits as FORMING in batch_former.h says (full, a preferred size, or
  // the head's max_queue_delay_us), as Triton's and TF Serving's batchers do.
  bool wait_when_idle = false;
  // Work-conserving only: when Schedule finds an instance free, the caller's thread runs the
  // batch itself instead of waking the instance's worker (saves two thread hand-offs at low
  // load). The caller then blocks in Schedule until the batch has run.
  bool run_on_caller_when_idle = false;
  // With wait_when_idle: how long the request at the head of the queue waits for others to
  // join before its batch is formed anyway. 0: a batch is formed from whatever is queued when
  // an instance is free. Must be >= 0.
  int64_t max_queue_delay_us = 0;
  // Requests queued (not yet wholly in batches) beyond which Schedule answers
  // RESOURCE_EXHAUSTED. 0: unbounded. Must be >= 0.
  int64_t max_queue_size = 0;
  // Longest a request may wait in the queue before it fails with DEADLINE_EXCEEDED; a request's
  // own deadline can only shorten it. 0: no limit but the request's own. Must be >= 0.
  int64_t default_timeout_us = 0;
  // Priority levels 1 (served first) .. priority_levels. 0: a single level, and every request
  // must ask for priority 0. Must be >= 0.
  int priority_levels = 0;
  // The level of a request that asks for priority 0. Must be in [1, priority_levels] when
  // priority_levels > 0, and 0 when it is 0.
  int default_priority_level = 0;
  // Bound on a batch's computed steps (sequences x longest length: what cuDNN pays) against its
  // real steps (the sum of the lengths): 1.1 allows 10% padding, so long and short sequences
  // go to different batches. 0: no bound; lengths play no part in forming. Otherwise >= 1.
  double max_computed_steps_ratio = 1.1;
  // One entry per model input: true when its axis 1 is the time axis, which is zero-padded to
  // the batch's longest when requests of different T share a batch. Must not be empty.
  std::vector<bool> input_time_axis = {};
  // One entry per model output: true when its axis 1 is the time axis, which is cropped back
  // to each request's own T.
  std::vector<bool> output_time_axis = {};
};

// INVALID_ARGUMENT naming the first bad field and the values it accepts.
absl::Status ValidateOptions(const DynamicBatcherOptions& options);

// How the batcher forms batches, in the log's words: what it honours, and a setting that the
// other settings leave unused (a queue delay without wait_when_idle) said to be unused.
std::string DescribeForming(const DynamicBatcherOptions& options);

}  // namespace rnnserve::server::batching
