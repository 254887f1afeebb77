#pragma once

// How a chain of recurrent layers is split into runs of stacked layers (one launch of FusedRnn's
// stacked kernel each) and whether that beats the layers apart: shared by
// CudnnRecurrent::ForwardStack and FusedRnn::ForwardChain, which time it once per batch size and
// step bucket.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rnnserve::engine::cuda {

// T rounded up to a power of two.
inline int StepBucket(int T) {
  int b = 1;
  while (b < T && b < (1 << 30)) b <<= 1;
  return b;
}

// The least of three timed runs of `run` on the stream (after the caller's warm-up), in ms; 1e30
// when a run fails.
float LeastOfThree(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                   const std::function<absl::Status()>& run);

// The sizes of the runs of a chain of n layers, from the bottom: each as long as its layers stack
// (stacks_on(i): layer i + 1 on layer i) and fit at once (most(i): the most layers of a stack with
// layer i at its bottom; below 2, layer i runs alone).
std::vector<int> StackRuns(size_t n, const std::function<int(size_t)>& most,
                           const std::function<bool(size_t)>& stacks_on);

// The choices of a chain's bottom layer per (batch size, step bucket): the runs of stacked
// layers, or none where the layers ran apart.
using StackChoices = std::map<std::pair<int, int>, std::vector<int>>;

// Runs a chain of layers `apart`, or stacked: run(i, n) for each of its runs of n layers from
// layer i (StackRuns' `runs`), as `choices` has it for B sequences of T steps. Where every run is
// one layer, apart. The first such batch times the two on the stream (each once to warm up, then
// two rounds of each in turn, the least of three runs each) and records the faster; a batch
// captured into a graph before then runs apart. An error where `apart` fails.
absl::Status RunStackedOrApart(StackChoices* choices, int B, int T, const std::vector<int>& runs,
                               cudaStream_t stream, const std::function<absl::Status()>& apart,
                               const std::function<absl::Status(size_t, int)>& run);
// How a chain runs B sequences of T steps: "stacked 2+1/u8" (the runs, and the stacked kernel of
// the first run, kernel(B, layers)), "apart", or "" before its first such batch.
std::string StackChoiceFor(const StackChoices& choices, int B, int T,
                           const std::function<std::string(int, int)>& kernel);
// "B=3 T<=32 with the layers above: stacked 2/u8, ..." of every choice.
std::string StackChoicesSummary(const StackChoices& choices,
                                const std::function<std::string(int, int)>& kernel);

}  // namespace rnnserve::engine::cuda
