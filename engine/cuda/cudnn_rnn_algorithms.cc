// CudnnRecurrent's algorithm choice: each batch-size bucket and step bucket times the algorithms
// the layer can run once (with the first batch that falls in it), keeps the fastest, and reports
// the choices for the model's metadata.

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/cudnn_rnn_util.h"
#include "engine/cuda/fused_rnn.h"

namespace rnnserve::engine::cuda {
absl::StatusOr<cudnnRNNAlgo_t> CudnnRecurrent::ChooseAlgorithm(const RecurrentIO& io) {
  if (forced_) return forced_algo_;
  const std::pair<int, int> key = {BatchBucket(io.B), StepBucket(io.T)};
  if (auto it = algo_by_batch_.find(key); it != algo_by_batch_.end()) return it->second;
  // Timing synchronises the stream: not while a whole batch is being captured (the compiled
  // model runs a shape eagerly before it captures it, so this is only a guard).
  if (StreamCapturing(stream_)) {
    return absl::FailedPreconditionError(
        absl::StrCat("layer '", name_, "': no algorithm chosen yet for ", io.B, " sequences"));
  }
  cudnnRNNAlgo_t best = CUDNN_RNN_ALGO_STANDARD;
  const bool full = EveryLengthFull(io);
  std::vector<cudnnRNNAlgo_t> candidates;
  for (const auto& [algo, desc] : descs_) {
    // PERSIST_DYNAMIC does not take sequences of different lengths.
    if (algo != CUDNN_RNN_ALGO_PERSIST_DYNAMIC || full) candidates.push_back(algo);
  }
  if (Available(kStandardSeqMajorAlgo)) candidates.push_back(kStandardSeqMajorAlgo);
  if (fused_ && io.B <= FusedRnn::kMaxBatch) {
    if (fused_->has_grid()) candidates.push_back(kFusedAlgo);
    if (fused_->has_cluster()) candidates.push_back(kFusedClusterAlgo);
  } else if (fused_ && fused_->has_one_block_registers()) {
    candidates.push_back(kFusedAlgo);  // any batch: a block a group of sequences
  }
  if (fused_ && fused_->has_batched() && io.B <= FusedRnn::kMaxBatchedBatch) {
    candidates.push_back(kFusedBatchedAlgo);
  }
  if (candidates.size() > 1) {
    cudaEvent_t start, stop;
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&start), "cudaEventCreate"));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaEventCreate(&stop), "cudaEventCreate"));
    float best_ms = 0.0f;
    std::vector<cudnnRNNAlgo_t> failed;
    // Timed the way batches will run: replayed from a graph where the layer uses graphs (there
    // cuDNN's per-step launches cost nothing), eagerly otherwise.
    const bool graphs = use_graphs_;
    for (cudnnRNNAlgo_t algo : candidates) {
      // One warm-up, then the minimum of three timed runs.
      if (!Enqueue(algo, io).ok() || cudaStreamSynchronize(stream_) != cudaSuccess) {
        cudaGetLastError();
        failed.push_back(algo);
        continue;
      }
      cudaGraphExec_t exec = nullptr;
      if (graphs) {
        cudaGraph_t graph = nullptr;
        if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
          const absl::Status s = Enqueue(algo, io);
          if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && s.ok() &&
              cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
            exec = nullptr;
          }
          if (graph != nullptr) cudaGraphDestroy(graph);
        }
        cudaGetLastError();
      }
      const float ms_min = LeastOfThree(stream_, start, stop, [&]() {
        return exec != nullptr ? CudaOk(cudaGraphLaunch(exec, stream_), "launch")
                               : Enqueue(algo, io);
      });
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (best_ms == 0.0f || ms_min < best_ms) {
        best_ms = ms_min;
        best = algo;
      }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    for (cudnnRNNAlgo_t algo : failed) {
      if (algo == CUDNN_RNN_ALGO_STANDARD) continue;  // its error surfaces in Forward
      // PERSIST_DYNAMIC is built per batch size: a failure here is this size's only.
      if (algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) continue;
      if (algo == kFusedAlgo) {
        fused_.reset();
        continue;
      }
      if (algo == kFusedClusterAlgo) {
        if (fused_) fused_->DropCluster();
        continue;
      }
      if (algo == kFusedBatchedAlgo) {
        if (fused_) fused_->DropBatched();
        continue;
      }
      // The standard algorithm's descriptor: its error surfaces in Forward, as STANDARD's.
      if (algo == kStandardSeqMajorAlgo) continue;
      cudnnDestroyRNNDescriptor(descs_.at(algo));
      descs_.erase(algo);
    }
    // Sizes timed earlier may have chosen what was just dropped: they choose again.
    std::erase_if(algo_by_batch_, [&](const auto& entry) { return !Available(entry.second); });
  }
  algo_by_batch_[key] = best;
  return best;
}

absl::Status CudnnRecurrent::ForwardStack(const std::vector<StackEntry>& layers) {
  auto apart = [&]() -> absl::Status {
    for (const StackEntry& e : layers) RNNSERVE_RETURN_IF_ERROR(e.rnn->Forward(e.io));
    return absl::OkStatus();
  };
  if (layers.empty()) return absl::OkStatus();
  CudnnRecurrent& bottom = *layers[0].rnn;
  const RecurrentIO& io = layers[0].io;
  RNNSERVE_RETURN_IF_ERROR(bottom.CheckBatch(io));
  // Whether layer i + 1 may run in one launch with layer i.
  auto stacks_on = [&](size_t i) {
    const CudnnRecurrent& a = *layers[i].rnn;
    const CudnnRecurrent& b = *layers[i + 1].rnn;
    const RecurrentIO& up = layers[i + 1].io;
    return !a.forced_ && !b.forced_ && a.fused_ && b.fused_ && a.fused_->Stacks(*b.fused_) &&
           up.B == io.B && up.T == io.T && up.x == layers[i].io.y &&
           std::equal(io.lengths.begin(), io.lengths.end(), up.lengths.begin(), up.lengths.end());
  };
  const std::vector<int> runs = StackRuns(
      layers.size(),
      [&](size_t i) {
        const CudnnRecurrent& first = *layers[i].rnn;
        return io.B <= FusedRnn::kMaxBatch && first.fused_ && !first.forced_
                   ? first.fused_->max_stack_layers()
                   : 0;
      },
      stacks_on);
  // A run of n layers from layer i: one launch of FusedRnn's stacked kernel (n > 1). Against
  // every layer apart, each on the algorithm it chooses.
  auto run = [&](size_t i, int n) -> absl::Status {
    const StackEntry& base = layers[i];
    if (n == 1) return base.rnn->Forward(base.io);
    std::vector<FusedRnn::StackLayer> uppers;
    for (int k = 1; k < n; ++k) {
      uppers.push_back({layers[i + k].rnn->fused_.get(), layers[i + k].io});
    }
    RNNSERVE_RETURN_IF_ERROR(base.rnn->fused_->ForwardStack(base.io, uppers));
    for (int k = 0; k < n; ++k) {
      CudnnRecurrent& r = *layers[i + k].rnn;
      r.last_bakes_lengths_ = false;
      RNNSERVE_RETURN_IF_ERROR(RepeatKerasLastOutputs(r.spec_, layers[i + k].io, r.stream_));
    }
    return absl::OkStatus();
  };
  return RunStackedOrApart(&bottom.stack_by_batch_, io.B, io.T, runs, bottom.stream_, apart, run);
}

std::string CudnnRecurrent::StackFor(int B, int T) const {
  return StackChoiceFor(stack_by_batch_, B, T,
                        [&](int b, int layers) { return fused_->StackKernelFor(b, layers); });
}

absl::Status CudnnRecurrent::ForceAlgorithm(cudnnRNNAlgo_t algo) {
  const bool fused_ok = (algo == kFusedAlgo && fused_ && fused_->has_grid()) ||
                        (algo == kFusedClusterAlgo && fused_ && fused_->has_cluster()) ||
                        (algo == kFusedBatchedAlgo && fused_ && fused_->has_batched()) ||
                        (algo == kStandardSeqMajorAlgo && Available(algo));
  if (!descs_.contains(algo) && !fused_ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("layer '", name_, "': cuDNN did not accept algorithm ", AlgoName(algo)));
  }
  forced_ = true;
  forced_algo_ = algo;
  return absl::OkStatus();
}

std::string CudnnRecurrent::AlgorithmFor(int B, int T) const {
  if (forced_) return NameFor(forced_algo_, B);
  auto it = algo_by_batch_.find({BatchBucket(B), StepBucket(T)});
  return it == algo_by_batch_.end() ? "" : NameFor(it->second, B);
}

std::string CudnnRecurrent::FusedTimingsFor(int B) const {
  if (!fused_) return "";
  const std::string grid = fused_->GridTimingsFor(B), batched = fused_->BatchedTimingsFor(B);
  return absl::StrCat(grid, !grid.empty() && !batched.empty() ? "," : "", batched);
}

std::string CudnnRecurrent::NameFor(cudnnRNNAlgo_t algo, int B) const {
  std::string name = AlgoName(algo, dtype_);
  // Half weights time several cluster kernels per batch size: which one, e.g. "/mma16".
  if (algo == kFusedClusterAlgo && fused_ && fused_->weights() != FusedRnnWeights::kFp32) {
    if (const std::string k = fused_->ClusterKernelFor(B); !k.empty()) {
      absl::StrAppend(&name, "/", k);
    }
  }
  // Which of the grid, register and one-block kernels, e.g. "/reg8x2" or "/one_block".
  if (algo == kFusedAlgo && fused_) {
    if (const std::string k = fused_->GridKernelFor(B); !k.empty()) {
      absl::StrAppend(&name, "/", k);
    }
  }
  // The batch-tiled kernel's shape, e.g. "/g2b64t2x8".
  if (algo == kFusedBatchedAlgo && fused_) {
    if (const std::string k = fused_->BatchedKernelFor(B); !k.empty()) {
      absl::StrAppend(&name, "/", k);
    }
  }
  return name;
}

std::string CudnnRecurrent::ChoicesSummary() const {
  if (forced_) return absl::StrCat("every batch: ", AlgoName(forced_algo_, dtype_));
  std::string out;
  for (const auto& [key, algo] : algo_by_batch_) {
    const int lo = key.first / 2 + 1;  // the bucket's batch sizes: lo..key.first
    absl::StrAppend(&out, out.empty() ? "" : ", ",
                    "B=", lo == key.first ? absl::StrCat(lo) : absl::StrCat(lo, "..", key.first),
                    " T<=", key.second, ": ", NameFor(algo, key.first));
  }
  const std::string stacks = StackChoicesSummary(
      stack_by_batch_, [&](int b, int layers) { return fused_->StackKernelFor(b, layers); });
  absl::StrAppend(&out, !out.empty() && !stacks.empty() ? ", " : "", stacks);
  return out;
}

std::vector<cudnnRNNAlgo_t> CudnnRecurrent::algorithms() const {
  std::vector<cudnnRNNAlgo_t> out;
  for (const auto& [algo, desc] : descs_) out.push_back(algo);
  if (Available(kStandardSeqMajorAlgo)) out.push_back(kStandardSeqMajorAlgo);
  if (fused_ && fused_->has_grid()) out.push_back(kFusedAlgo);
  if (fused_ && fused_->has_cluster()) out.push_back(kFusedClusterAlgo);
  if (fused_ && fused_->has_batched()) out.push_back(kFusedBatchedAlgo);
  return out;
}

}  // namespace rnnserve::engine::cuda
