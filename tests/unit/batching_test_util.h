#pragma once

// Requests and answers for dynamic batcher tests.
//
// A test request of id `id` has rows b = 0..B-1 of T steps and 2 features, with
// x[b, t, 0] = id + b + t / 4 and x[b, t, 1] = 0, so x[b, 0, 0] = id + b names the row (ids are
// multiples of 100 in the tests).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "server/batching/batch_request.h"

namespace rnnserve::testing {

struct Answer {
  absl::Notification done;
  absl::StatusOr<std::vector<engine::Tensor>> result = absl::UnknownError("not answered");
  int calls = 0;  // how often `done` ran: must be 1
};

struct RequestSpec {
  float id = 0;
  int64_t rows = 1;
  int64_t steps = 4;
  std::vector<int32_t> lengths = {};  // empty: none given
  int64_t features = 2;
  absl::Time deadline = absl::InfiniteFuture();
  int priority = 0;
  std::vector<float> initial_h = {};  // one per row: initial_states["rnn"] = {[rows, 1]}
  std::map<std::string, std::vector<engine::Tensor>>* final_states = nullptr;
};

// What the fake engine's layer "rnn" ends at for row `row` of a request: initial_h + its sum.
float FinalH(const RequestSpec& spec, int64_t row);

float Value(float id, int64_t row, int64_t t);

// The request, and the answer its `done` fills.
std::unique_ptr<server::batching::BatchRequest> MakeRequest(const RequestSpec& spec,
                                                            std::shared_ptr<Answer>* answer);

// Checks an answer of the fake engine (batching_fake_engine.h) against the request that asked:
// echo [rows, steps, 1] and summary [rows, 2] for exactly its rows and lengths.
::testing::AssertionResult IsOwnAnswer(const Answer& answer, const RequestSpec& spec);

}  // namespace rnnserve::testing
