// Whole-batch CUDA graphs of the GPU engine's compiled model (cuda_compiled_model.h says when a
// batch is captured and replayed). A replay does none of Run's host work: the graph's uploads
// read the graph's own page-locked area, into which the batch's inputs, lengths and slot numbers
// are copied, and its downloads write the graph's own page-locked outputs, copied out for the
// caller (who may hold them while the next batch replays).

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"

namespace rnnserve::engine::cuda {
namespace {

size_t Bytes(const Tensor& t) {
  return static_cast<size_t>(t.num_elements()) * (t.dtype() == DType::kFloat32 ? 4 : 8);
}

const void* Data(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? static_cast<const void*>(t.f32())
                                      : static_cast<const void*>(t.i64());
}

void* Data(Tensor& t) {
  return t.dtype() == DType::kFloat32 ? static_cast<void*>(t.f32()) : static_cast<void*>(t.i64());
}

}  // namespace

CudaCompiledModel::ModelGraph::~ModelGraph() {
  if (exec != nullptr) cudaGraphExecDestroy(exec);
}

void CudaCompiledModel::ClearGraphs() {
  graphs_.clear();
  graph_bytes_ = 0;
}

std::string CudaCompiledModel::GraphKeyOf(const Batch& batch) const {
  // What Run's host decisions depend on, beyond the values: shapes, the continuation flag, the
  // slot store, and of the lengths the longest, whether any row is short and whether any is 0
  // (which picks the kernel). Layers whose launches depend on every length say so at capture
  // (ModelGraph::exact_lengths).
  std::string key;
  for (const Tensor& t : batch.inputs) {
    absl::StrAppend(&key, static_cast<int>(t.dtype()), ":");
    for (int64_t d : t.shape()) absl::StrAppend(&key, d, ",");
    key += "|";
  }
  if (!batch.lengths.empty()) {
    const int32_t longest = *std::max_element(batch.lengths.begin(), batch.lengths.end());
    const int32_t shortest = *std::min_element(batch.lengths.begin(), batch.lengths.end());
    absl::StrAppend(&key, "L", longest, shortest == longest ? "=" : "<", shortest == 0 ? "0" : "");
  }
  absl::StrAppend(&key, batch.continues ? "|c" : "|", "|",
                  reinterpret_cast<uintptr_t>(slots_ != nullptr ? slots_->stores.data() : nullptr));
  return key;
}

Tensor CudaCompiledModel::CopyOut(const Tensor& t) const {
  auto pinned = pinned_->NewTensor(t.dtype(), t.shape());
  Tensor out = pinned.ok() ? *std::move(pinned)
                           : (t.dtype() == DType::kFloat32 ? Tensor::Float(t.shape())
                                                           : Tensor::Int64(t.shape()));
  std::memcpy(Data(out), Data(t), Bytes(t));
  return out;
}

absl::StatusOr<bool> CudaCompiledModel::Replay(const std::string& key, const Batch& batch,
                                               std::vector<Tensor>* outputs) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) return false;
  ModelGraph& g = *it->second;
  if (g.generation != DeviceBuffer::Generation().load(std::memory_order_relaxed)) {
    ClearGraphs();  // a buffer some graph reads or writes may have moved
    return false;
  }
  if (g.exact_lengths && g.lengths != batch.lengths) {
    // cuDNN's own algorithms bake every length in: batches of mixed lengths would capture one
    // graph each and replay none. This key runs eagerly (its layers replay their own graphs).
    graph_bytes_ -= g.held_bytes;
    graphs_.erase(it);
    graph_keys_[key] = false;
    return false;
  }
  for (const ModelGraph::Source& src : g.sources) {
    const void* data = nullptr;
    size_t bytes = 0;
    switch (src.kind) {
      case ModelGraph::Source::Kind::kInput:
        data = Data(batch.inputs[src.index]);
        bytes = Bytes(batch.inputs[src.index]);
        break;
      case ModelGraph::Source::Kind::kLengths:
        data = batch.lengths.data();
        bytes = batch.lengths.size() * sizeof(int32_t);
        break;
      case ModelGraph::Source::Kind::kSlots:
        if (slots_ == nullptr) return false;
        data = slots_->rows->data();
        bytes = slots_->rows->size() * sizeof(int32_t);
        break;
    }
    if (bytes != src.bytes) return false;  // the key should have told them apart: run eagerly
    std::memcpy(g.staging.base() + src.offset, data, bytes);
  }
  stream_idle_ = false;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch (batch)"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  stream_idle_ = true;
  host_copies_in_last_run_ = 0;
  outputs->clear();
  for (int k : g.output_of) outputs->push_back(CopyOut(g.outputs[k]));
  ++graph_replays_;
  return true;
}

absl::StatusOr<bool> CudaCompiledModel::RunCaptured(const std::string& key, const Batch& batch,
                                                    std::vector<Tensor>* outputs) {
  // Every way out but a success and a capture spoilt by an allocation elsewhere: the key runs
  // eagerly from now on.
  auto give_up = [&] {
    graph_keys_[key] = false;
    return false;
  };
  // Long or large batches gain nothing from one launch, and a graph of cuDNN's per-step
  // launches costs a node each to instantiate: they run eagerly (their recurrent layers still
  // replay their own graphs).
  size_t input_bytes = 0;
  for (const Tensor& t : batch.inputs) {
    if (t.rank() >= 2 && t.dim(1) > kMaxGraphSteps) return give_up();
    input_bytes += Bytes(t) + 256;
  }
  if (input_bytes > kMaxGraphInputBytes) return give_up();
  auto graph = std::make_unique<ModelGraph>();
  graph->staging.Reserve(input_bytes + (size_t{16} << 10));
  if (graph->staging.base() == nullptr) return give_up();
  graph->generation = DeviceBuffer::Generation().load(std::memory_order_relaxed);
  graph->lengths = batch.lengths;

  Capture capture{.graph = graph.get()};
  // Relaxed: the pinned pool may allocate an output block while the stream is captured.
  if (cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed) != cudaSuccess) {
    cudaGetLastError();
    graph_note_ = "cudaStreamBeginCapture failed";
    return give_up();
  }
  capture_ = &capture;
  const absl::Status enqueued = EnqueueBatch(batch);
  capture_ = nullptr;
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream_, &captured);
  cudaGraphExec_t exec = nullptr;
  const bool moved = graph->generation != DeviceBuffer::Generation().load();
  // A graph that is not replayable is never launched either: it may copy from pageable memory
  // or bake in what only this batch has. The batch runs eagerly instead, as does its key from
  // now on; so does a batch that synchronises, allocates or fails while captured.
  cudaError_t instantiated = cudaErrorUnknown;
  if (enqueued.ok() && capture.replayable && ended == cudaSuccess && captured != nullptr &&
      !moved) {
    instantiated = cudaGraphInstantiate(&exec, captured, 0);
  }
  if (instantiated != cudaSuccess) {
    graph_note_ = absl::StrCat("a batch could not be captured: ",
                               !enqueued.ok()         ? enqueued.message()
                               : !capture.replayable  ? capture.why
                               : ended != cudaSuccess ? cudaGetErrorString(ended)
                               : captured == nullptr  ? "no graph"
                               : moved                ? "device memory allocated"
                                                      : cudaGetErrorString(instantiated));
    if (captured != nullptr) cudaGraphDestroy(captured);
    cudaGetLastError();
    // Device memory allocated meanwhile (this model's first batch of a larger size, or another
    // instance's) is no fault of the shape: it is captured again next time.
    return moved && enqueued.ok() && capture.replayable ? false : give_up();
  }
  cudaGraphDestroy(captured);
  graph->exec = exec;
  stream_idle_ = false;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch (batch)"));
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  stream_idle_ = true;

  // The outputs the graph downloads stay with it; the caller gets copies.
  outputs->clear();
  for (size_t i = 0; i < model_.output_values.size(); ++i) {
    const int id = model_.output_values[i];
    const auto first = std::find(model_.output_values.begin(), model_.output_values.end(), id);
    if (first != model_.output_values.begin() + i) {  // the same value named twice
      const int k = graph->output_of[first - model_.output_values.begin()];
      graph->output_of.push_back(k);
      outputs->push_back(CopyOut(graph->outputs[k]));
      continue;
    }
    DevValue& v = values_[id];
    graph->output_of.push_back(static_cast<int>(graph->outputs.size()));
    if (v.input != nullptr || !v.host_valid || !v.host.wrapped()) {
      // A passed-through input, or not the page-locked block the graph downloads into.
      capture.replayable = false;
      graph->outputs.push_back(v.host_tensor());
    } else {
      graph->outputs.push_back(std::move(v.host));  // the block itself (copies are deep)
      v.host_valid = false;
    }
    outputs->push_back(CopyOut(graph->outputs.back()));
  }
  // The graph keeps its page-locked area and outputs: bounded per graph and per instance.
  size_t held = input_bytes + (size_t{16} << 10);
  for (const Tensor& t : graph->outputs) held += Bytes(t);
  graph->held_bytes = held;
  if (!capture.replayable || held > 2 * kMaxGraphInputBytes) {
    graph_note_ =
        capture.replayable ? "outputs too large to keep" : "an output the graph does not download";
    give_up();
    return true;
  }
  if (graphs_.size() >= kMaxGraphs || graph_bytes_ + held > kMaxGraphBytes) ClearGraphs();
  graph_bytes_ += held;
  graphs_[key] = std::move(graph);
  return true;
}

}  // namespace rnnserve::engine::cuda
