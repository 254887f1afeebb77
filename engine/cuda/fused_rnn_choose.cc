// FusedRnn's choice of a kernel for a batch (fused_rnn.h): which kernels take a batch size, the
// timing of the candidates once per batch-size bucket, and the names the choices are reported by.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/fused_rnn_batched_kernel.h"

namespace rnnserve::engine::cuda {
namespace {

// "name:ms,name:ms" of the candidates Fastest timed (times: theirs, in order).
template <typename Name>
std::string TimingsOf(const std::vector<int>& candidates, const std::vector<float>& times,
                      Name name) {
  std::string out;
  for (size_t i = 0; i < times.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", name(candidates[i]), ":", absl::SixDigits(times[i]));
  }
  return out;
}

}  // namespace

std::string FusedRnn::ClusterKernelFor(int B) const {
  int index = clusters_.size() == 1 ? 0 : -1;
  if (auto it = cluster_by_batch_.find(B); it != cluster_by_batch_.end()) index = it->second;
  if (index < 0) return "";
  const FusedRnnClusterShape& shape = clusters_[index].shape;
  return absl::StrCat(shape.mma ? "mma" : "fma", shape.cluster);
}

bool FusedRnn::Takes(int B) const {
  return B >= 1 &&
         ((B <= kMaxBatch && has_grid()) || (B <= kMaxBatchedBatch && has_batched()) || block_reg_);
}

FusedRnn::Kernel FusedRnn::KernelTaking(int B) const {
  if (B <= kMaxBatch && has_grid()) return Kernel::kGrid;
  return B <= kMaxBatchedBatch && has_batched() ? Kernel::kBatched : Kernel::kGrid;
}

FusedRnn::Kernel FusedRnn::FastestKernelFor(int B) const {
  auto it = fastest_by_batch_.find(GridKey(B));
  return it == fastest_by_batch_.end() ? KernelTaking(B) : it->second;
}

absl::Status FusedRnn::ForwardFastest(const RecurrentIO& io) {
  const int key = GridKey(io.B);
  const bool both = io.B <= kMaxBatch && has_grid() && has_batched();
  if (!both || fastest_by_batch_.contains(key) || StreamCapturing(stream_)) {
    return Forward(io, FastestKernelFor(io.B));
  }
  // Each kernel's own choice first (its timings), then the two against each other.
  RNNSERVE_RETURN_IF_ERROR(Forward(io, Kernel::kGrid));
  RNNSERVE_RETURN_IF_ERROR(Forward(io, Kernel::kBatched));
  const std::vector<int> candidates = {static_cast<int>(Kernel::kGrid),
                                       static_cast<int>(Kernel::kBatched)};
  bool timed = false;
  auto best = Fastest(
      candidates, [&](int k) { return Forward(io, static_cast<Kernel>(k)); }, &timed);
  if (!best.ok()) return best.status();
  if (timed) fastest_by_batch_[key] = static_cast<Kernel>(*best);
  return Forward(io, static_cast<Kernel>(*best));
}

int FusedRnn::GridKey(int B) {
  int key = B;
  if (B > kMaxBatch) {
    key = kMaxBatch;
    while (key < B) key *= 2;
  }
  return key;
}

std::string FusedRnn::GridKernelFor(int B) const {
  auto it = grid_by_batch_.find(GridKey(B));
  return it == grid_by_batch_.end() ? "" : GridKernelName(it->second);
}

std::string FusedRnn::GridTimingsFor(int B) const {
  auto it = grid_times_by_batch_.find(GridKey(B));
  return it == grid_times_by_batch_.end() ? "" : it->second;
}

std::string FusedRnn::GridKernelName(int blocks) {
  if (blocks == 0) return "one_block";
  if (blocks > kBlockRegLaunch) {  // "one_block_reg2" (2 lanes, 2 a block), "one_block_reg2x1"
    const int lanes = BlockRegLanes(blocks), per_block = BlockRegPerBlock(blocks);
    return absl::StrCat("one_block_reg", lanes,
                        per_block == lanes ? "" : absl::StrCat("x", per_block));
  }
  if (blocks > 0) return absl::StrCat("grid", blocks);
  const int units = -blocks % kRegGroupsCode, groups = -blocks / kRegGroupsCode + 1;
  return absl::StrCat("reg", units, groups > 1 ? absl::StrCat("x", groups) : "");
}

std::string FusedRnn::BatchedKernelFor(int B) const {
  auto it = batched_by_batch_.find(GridKey(B));
  if (it == batched_by_batch_.end()) return "";
  return BatchedShapeName(it->second);
}

std::string FusedRnn::BatchedShapeName(const BatchedShape& shape) {
  const FusedBatchedTile& tile = kBatchedTiles[shape.tile];
  return absl::StrCat("g", shape.groups, "b", shape.blocks,
                      tile.mma ? absl::StrCat("tf32x", tile.mma, "_") : "t", tile.units, "x",
                      tile.seqs);
}

std::string FusedRnn::BatchedTimingsFor(int B) const {
  auto it = batched_times_by_batch_.find(GridKey(B));
  return it == batched_times_by_batch_.end() ? "" : it->second;
}

absl::StatusOr<FusedRnn::BatchedShape> FusedRnn::ChooseBatched(const RecurrentIO& io) {
  // Batch sizes share a timing as the grid kernels' do (GridKey): a batcher's sizes 33..64
  // are timed once, not once each (a timing runs every shape four times).
  const int key = GridKey(io.B);
  if (auto it = batched_by_batch_.find(key); it != batched_by_batch_.end()) return it->second;
  // Groups of fewer than 4 sequences would pad most of each register tile.
  std::vector<int> candidates;
  for (size_t i = 0; i < batched_shapes_.size(); ++i) {
    if (batched_shapes_[i].groups == 1 || io.B >= 4 * batched_shapes_[i].groups) {
      candidates.push_back(static_cast<int>(i));
    }
  }
  bool timed = false;
  std::vector<float> times;
  auto best = Fastest(
      candidates, [&](int i) { return ForwardBatched(io, batched_shapes_[i]); }, &timed, &times);
  if (!best.ok()) return best.status();
  const BatchedShape shape = batched_shapes_[*best];
  if (timed || candidates.size() == 1) batched_by_batch_[key] = shape;
  if (timed) {
    batched_times_by_batch_[key] =
        TimingsOf(candidates, times, [&](int i) { return BatchedShapeName(batched_shapes_[i]); });
  }
  return shape;
}

absl::StatusOr<int> FusedRnn::ChooseGrid(const RecurrentIO& io) {
  const int key = GridKey(io.B);
  if (auto it = grid_by_batch_.find(key); it != grid_by_batch_.end()) return it->second;
  std::vector<int> candidates;
  if (io.B <= kMaxBatch) {
    candidates = grids_;
    if (io.B <= small_max_batch_) candidates.push_back(0);
    for (int units : reg_units_) candidates.push_back(RegistersLaunch(units, 1));
    // The register kernel on groups of at least 2 sequences.
    for (const auto& [units, groups] : reg_groups_) {
      if (io.B >= 2 * groups) candidates.push_back(RegistersLaunch(units, groups));
    }
  }
  // The one-block register kernel: blocks of `lanes` sequences, and (past one sequence) blocks
  // of one.
  for (int lanes : one_block_register_lanes()) {
    candidates.push_back(BlockRegLaunch(lanes, lanes));
    if (io.B > 1 && lanes > 1) candidates.push_back(BlockRegLaunch(lanes, 1));
  }
  bool timed = false;
  std::vector<float> times;
  auto best = Fastest(
      candidates, [&](int blocks) { return Launch(io, blocks); }, &timed, &times);
  // A lone candidate is the choice without timing (and is named by GridKernelFor too).
  if (best.ok() && (timed || candidates.size() == 1)) {
    grid_by_batch_[key] = *best;
    if (timed) grid_times_by_batch_[key] = TimingsOf(candidates, times, GridKernelName);
  }
  return best;
}

absl::StatusOr<int> FusedRnn::Fastest(const std::vector<int>& candidates,
                                      const std::function<absl::Status(int)>& launch, bool* timed,
                                      std::vector<float>* times) {
  *timed = false;
  if (candidates.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(name(), ": no kernel to choose from"));
  }
  int best = candidates.front();
  if (candidates.size() <= 1 || StreamCapturing(stream_)) return best;
  cudaEvent_t start, stop;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&start), "cudaEventCreate"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&stop), "cudaEventCreate"));
  float best_ms = 1e30f;
  absl::Status status;
  for (int candidate : candidates) {
    status = launch(candidate);  // warm-up
    if (!status.ok()) break;
    float ms_min = 1e30f;
    for (int rep = 0; rep < 3 && status.ok(); ++rep) {
      float ms = 0.0f;
      cudaEventRecord(start, stream_);
      status = launch(candidate);
      cudaEventRecord(stop, stream_);
      if (status.ok()) status = CudaOk(cudaEventSynchronize(stop), "cudaEventSynchronize");
      cudaEventElapsedTime(&ms, start, stop);
      ms_min = std::min(ms_min, ms);
    }
    if (!status.ok()) break;
    if (times) times->push_back(ms_min);
    if (ms_min < best_ms) {
      best_ms = ms_min;
      best = candidate;
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RNNSERVE_RETURN_IF_ERROR(status);
  *timed = true;
  return best;
}

absl::Status FusedRnn::LaunchCluster(const RecurrentIO& io) {
  if (clusters_.size() == 1) return LaunchClusterOf(io, 0);
  if (auto it = cluster_by_batch_.find(io.B); it != cluster_by_batch_.end()) {
    return LaunchClusterOf(io, it->second);
  }
  std::vector<int> candidates(clusters_.size());
  for (size_t i = 0; i < candidates.size(); ++i) candidates[i] = static_cast<int>(i);
  bool timed = false;
  auto best = Fastest(
      candidates, [&](int i) { return LaunchClusterOf(io, i); }, &timed);
  if (!best.ok()) return best.status();
  if (timed) cluster_by_batch_[io.B] = *best;
  return LaunchClusterOf(io, *best);
}

}  // namespace rnnserve::engine::cuda
