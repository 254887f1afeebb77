#include "engine/cuda/stack_timing.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "engine/cuda/cuda_util.h"

namespace rnnserve::engine::cuda {

float LeastOfThree(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop,
                   const std::function<absl::Status()>& run) {
  float ms_min = 1e30f;
  for (int rep = 0; rep < 3; ++rep) {
    float ms = 0.0f;
    cudaEventRecord(start, stream);
    const absl::Status s = run();
    cudaEventRecord(stop, stream);
    if (!s.ok() || cudaEventSynchronize(stop) != cudaSuccess ||
        cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
      ms = 1e30f;
    }
    ms_min = std::min(ms_min, ms);
  }
  return ms_min;
}

std::vector<int> StackRuns(size_t n, const std::function<int(size_t)>& most,
                           const std::function<bool(size_t)>& stacks_on) {
  std::vector<int> runs;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    const int fit = most(i);
    while (j < n && static_cast<int>(j - i) < fit && stacks_on(j - 1)) ++j;
    runs.push_back(static_cast<int>(j - i));
    i = j;
  }
  return runs;
}

namespace {

// Whether `stacked` runs faster than `apart` (RunStackedOrApart); false where only `stacked`
// fails.
absl::StatusOr<bool> StackedFaster(cudaStream_t stream, const std::function<absl::Status()>& apart,
                                   const std::function<absl::Status()>& stacked) {
  cudaEvent_t start, stop;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&start), "cudaEventCreate"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&stop), "cudaEventCreate"));
  absl::Status warm = apart();
  if (warm.ok()) warm = CudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  absl::Status warm_stacked = stacked();
  if (warm_stacked.ok()) {
    warm_stacked = CudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  cudaGetLastError();
  float apart_ms = 1e30f, stacked_ms = 1e30f;
  for (int round = 0; round < 2 && warm.ok(); ++round) {
    apart_ms = std::min(apart_ms, LeastOfThree(stream, start, stop, apart));
    if (warm_stacked.ok()) {
      stacked_ms = std::min(stacked_ms, LeastOfThree(stream, start, stop, stacked));
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RNNSERVE_RETURN_IF_ERROR(warm);
  return stacked_ms < apart_ms;
}

}  // namespace

absl::Status RunStackedOrApart(StackChoices* choices, int B, int T, const std::vector<int>& runs,
                               cudaStream_t stream, const std::function<absl::Status()>& apart,
                               const std::function<absl::Status(size_t, int)>& run) {
  if (std::all_of(runs.begin(), runs.end(), [](int n) { return n == 1; })) return apart();
  auto stacked = [&]() -> absl::Status {
    size_t i = 0;
    for (int n : runs) {
      RNNSERVE_RETURN_IF_ERROR(run(i, n));
      i += n;
    }
    return absl::OkStatus();
  };
  const std::pair<int, int> key = {B, StepBucket(T)};
  auto it = choices->find(key);
  if (it == choices->end()) {
    if (StreamCapturing(stream)) return apart();
    auto faster = StackedFaster(stream, apart, stacked);
    if (!faster.ok()) return faster.status();
    it = choices->emplace(key, *faster ? runs : std::vector<int>{}).first;
  }
  if (it->second != runs) return apart();
  return stacked();
}

std::string StackChoiceFor(const StackChoices& choices, int B, int T,
                           const std::function<std::string(int, int)>& kernel) {
  auto it = choices.find({B, StepBucket(T)});
  if (it == choices.end()) return "";
  if (it->second.empty()) return "apart";
  return absl::StrCat("stacked ", absl::StrJoin(it->second, "+"), "/", kernel(B, it->second[0]));
}

std::string StackChoicesSummary(const StackChoices& choices,
                                const std::function<std::string(int, int)>& kernel) {
  std::string out;
  for (const auto& [key, runs] : choices) {
    absl::StrAppend(
        &out, out.empty() ? "" : ", ", "B=", key.first, " T<=", key.second,
        " with the layers above: ", StackChoiceFor(choices, key.first, key.second, kernel));
  }
  return out;
}

}  // namespace rnnserve::engine::cuda
