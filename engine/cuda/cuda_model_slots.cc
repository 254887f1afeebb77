// Slot states in device memory (engine/slot_states.h): step-level batching's sequences keep their
// recurrent states on the GPU between chunks. A chunk's rows gather their initial states from
// the slot stores into the layer's h0/c0 and scatter the final states back, on the stream, so a
// chunk copies no state to or from the host and waits for nothing but its outputs.

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::engine::cuda {

class CudaSlotStates final : public SlotStates {
 public:
  struct Store {
    size_t layer = 0;                  // plans_ index
    std::vector<int> widths;           // H' (h), then H (c) for LSTM
    std::vector<DeviceBuffer> states;  // [capacity, width] each
  };

  CudaSlotStates(CudaCompiledModel* model, StateRows rows, std::map<std::string, Store> stores,
                 int capacity)
      : SlotStates(capacity), model_(model), rows_(std::move(rows)), stores_(std::move(stores)) {
    binding_.stores.assign(model_->plans_.size(), {nullptr, nullptr});
    for (auto& [name, store] : stores_) {
      for (size_t i = 0; i < store.states.size(); ++i) {
        binding_.stores[store.layer][i] = store.states[i].as<float>();
      }
    }
  }

  absl::Status Write(const std::vector<int32_t>& slots, const StateMap& states) override {
    RNNSERVE_RETURN_IF_ERROR(CheckSlots(slots, capacity(), "SlotStates::Write"));
    RNNSERVE_RETURN_IF_ERROR(CheckStateRows(states, rows_, static_cast<int64_t>(slots.size())));
    if (slots.empty()) return absl::OkStatus();
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(model_->device_), "cudaSetDevice"));
    RNNSERVE_RETURN_IF_ERROR(UploadRows(slots));
    const int64_t n = static_cast<int64_t>(slots.size());
    for (auto& [name, store] : stores_) {
      const auto given = states.find(name);
      for (size_t i = 0; i < store.states.size(); ++i) {
        const float* src = nullptr;
        if (given != states.end()) {
          // Through pageable memory: the call returns once the driver holds the bytes, so the
          // caller's tensor (page-locked or not) may go at once.
          const Tensor& t = given->second[i];
          host_.assign(t.f32(), t.f32() + t.num_elements());
          const size_t bytes = host_.size() * sizeof(float);
          RNNSERVE_RETURN_IF_ERROR(scratch_.Reserve(bytes));
          RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaMemcpyAsync(scratch_.get(), host_.data(), bytes,
                                                          cudaMemcpyHostToDevice, stream()),
                                          "cudaMemcpyAsync (slot states)"));
          src = scratch_.as<float>();
        }
        RNNSERVE_RETURN_IF_ERROR(
            CudaOk(LaunchMoveRows(src, nullptr, store.states[i].as<float>(),
                                  rows_dev_.as<int32_t>(), n, store.widths[i], stream()),
                   "slot state scatter kernel"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Read(const std::vector<int32_t>& slots, StateMap* states) override {
    RNNSERVE_RETURN_IF_ERROR(CheckSlots(slots, capacity(), "SlotStates::Read"));
    states->clear();
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(model_->device_), "cudaSetDevice"));
    const int64_t n = static_cast<int64_t>(slots.size());
    if (n > 0) RNNSERVE_RETURN_IF_ERROR(UploadRows(slots));
    // Every state gathered into one scratch area, then one copy each to the host and one wait.
    std::vector<std::pair<Tensor*, int64_t>> pending;  // tensor, offset in scratch (floats)
    int64_t total = 0;
    for (const auto& [name, store] : stores_) {
      for (int w : store.widths) total += n * w;
    }
    RNNSERVE_RETURN_IF_ERROR(scratch_.Reserve(std::max<int64_t>(total, 1) * sizeof(float)));
    int64_t offset = 0;
    for (auto& [name, store] : stores_) {
      std::vector<Tensor>& out = (*states)[name];
      for (size_t i = 0; i < store.states.size(); ++i) {
        out.push_back(Tensor::Float({n, store.widths[i]}));
        RNNSERVE_RETURN_IF_ERROR(CudaOk(
            LaunchMoveRows(store.states[i].as<float>(), rows_dev_.as<int32_t>(),
                           scratch_.as<float>() + offset, nullptr, n, store.widths[i], stream()),
            "slot state gather kernel"));
        offset += n * store.widths[i];
      }
    }
    offset = 0;
    for (auto& [name, tensors] : *states) {
      for (Tensor& t : tensors) {
        RNNSERVE_RETURN_IF_ERROR(CudaOk(
            cudaMemcpyAsync(t.f32(), scratch_.as<float>() + offset,
                            t.num_elements() * sizeof(float), cudaMemcpyDeviceToHost, stream()),
            "cudaMemcpyAsync (slot states)"));
        offset += t.num_elements();
      }
    }
    return CudaOk(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  }

  absl::Status Run(Batch batch, const std::vector<int32_t>& slots,
                   std::vector<Tensor>* outputs) override {
    RNNSERVE_RETURN_IF_ERROR(CheckRun(batch, slots, capacity()));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(model_->device_), "cudaSetDevice"));
    binding_.rows = &slots;
    model_->slots_ = &binding_;
    absl::Status st = model_->Run(batch, outputs);
    model_->slots_ = nullptr;
    return st;
  }

  const char* where() const override { return "device"; }

 private:
  cudaStream_t stream() const { return model_->stream_; }

  // The slot numbers to rows_dev_, through pageable memory (see Write).
  absl::Status UploadRows(const std::vector<int32_t>& slots) {
    const size_t bytes = slots.size() * sizeof(int32_t);
    RNNSERVE_RETURN_IF_ERROR(rows_dev_.Reserve(std::max<size_t>(bytes, 1)));
    rows_host_ = slots;
    return CudaOk(cudaMemcpyAsync(rows_dev_.get(), rows_host_.data(), bytes, cudaMemcpyHostToDevice,
                                  stream()),
                  "cudaMemcpyAsync (slots)");
  }

  CudaCompiledModel* const model_;
  const StateRows rows_;
  std::map<std::string, Store> stores_;
  CudaCompiledModel::SlotBinding binding_;
  DeviceBuffer rows_dev_;  // [n] int32: the slots of the call in flight
  DeviceBuffer scratch_;   // rows written or read
  std::vector<int32_t> rows_host_;
  std::vector<float> host_;
};

absl::StatusOr<std::unique_ptr<SlotStates>> CudaCompiledModel::NewSlotStates(const StateRows& rows,
                                                                             int capacity) {
  // Every layer with slots must be a one-direction recurrent layer with states of its own (no
  // state inputs wired in the graph) whose rows are [H'] and, for LSTM, [H]; else the host's.
  std::map<std::string, CudaSlotStates::Store> stores;
  for (const auto& [name, shapes] : rows) {
    size_t index = 0;
    while (index < model_.layers.size() && model_.layers[index].name != name) ++index;
    if (index == model_.layers.size()) return nullptr;
    const Layer& layer = model_.layers[index];
    const auto* spec = std::get_if<RecurrentSpec>(&layer.spec);
    if (spec == nullptr || spec->directions.size() != 1 || layer.inputs.size() != 1) {
      return nullptr;
    }
    CudaSlotStates::Store store{.layer = index};
    store.widths.push_back(spec->output_size());
    if (spec->cell == CellType::kLstm) store.widths.push_back(spec->hidden_size);
    if (shapes.size() != store.widths.size()) return nullptr;
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (shapes[i] != Shape{store.widths[i]}) return nullptr;
    }
    stores.emplace(name, std::move(store));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaSetDevice(device_), "cudaSetDevice"));
  for (auto& [name, store] : stores) {
    for (int w : store.widths) {
      const size_t bytes = sizeof(float) * capacity * w;
      DeviceBuffer b;
      RNNSERVE_RETURN_IF_ERROR(b.Reserve(bytes));
      RNNSERVE_RETURN_IF_ERROR(
          CudaOk(cudaMemsetAsync(b.get(), 0, bytes, stream_), "cudaMemsetAsync (slot states)"));
      store.states.push_back(std::move(b));
    }
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  return std::make_unique<CudaSlotStates>(this, rows, std::move(stores), capacity);
}

const std::array<float*, 2>* CudaCompiledModel::SlotStore(const LayerPlan& plan) const {
  if (slots_ == nullptr) return nullptr;
  const auto& s = slots_->stores[static_cast<size_t>(&plan - plans_.data())];
  return s[0] == nullptr ? nullptr : &s;
}

absl::StatusOr<std::vector<Tensor>> CudaCompiledModel::SlotStatesToHost(
    const RecurrentSpec& spec, LayerPlan& plan, const std::array<float*, 2>& store, int B) {
  const int per_dir = spec.cell == CellType::kLstm ? 2 : 1;
  std::vector<Tensor> states;
  for (int k = 0; k < per_dir; ++k) {
    const int width = k == 0 ? spec.output_size() : spec.hidden_size;
    DeviceBuffer& rows = k == 0 ? plan.h0 : plan.c0;
    RNNSERVE_RETURN_IF_ERROR(rows.Reserve(sizeof(float) * B * width));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows(store[k], slot_rows_dev_.as<int32_t>(),
                                                   rows.as<float>(), nullptr, B, width, stream_),
                                    "slot state gather kernel"));
    states.push_back(Tensor::Float({B, width}));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemcpyAsync(states.back().f32(), rows.get(), sizeof(float) * B * width,
                               cudaMemcpyDeviceToHost, stream_),
               "cudaMemcpyAsync (slot states)"));
  }
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
  return states;
}

absl::Status CudaCompiledModel::SlotStatesFromHost(const RecurrentSpec& spec, LayerPlan& plan,
                                                   const std::array<float*, 2>& store,
                                                   const std::vector<Tensor>& finals, int B) {
  const int per_dir = spec.cell == CellType::kLstm ? 2 : 1;
  if (finals.size() != static_cast<size_t>(per_dir)) {
    return absl::InternalError(absl::StrCat("the CPU kernel gave ", finals.size(),
                                            " final states; the layer has ", per_dir));
  }
  for (int k = 0; k < per_dir; ++k) {
    const int width = k == 0 ? spec.output_size() : spec.hidden_size;
    DeviceBuffer& rows = k == 0 ? plan.hy : plan.cy;
    RNNSERVE_RETURN_IF_ERROR(rows.Reserve(sizeof(float) * B * width));
    RNNSERVE_RETURN_IF_ERROR(CopyToDevice(rows.get(), finals[k].f32(), sizeof(float) * B * width,
                                          "cudaMemcpyAsync (slot states)"));
    RNNSERVE_RETURN_IF_ERROR(CudaOk(LaunchMoveRows(rows.as<float>(), nullptr, store[k],
                                                   slot_rows_dev_.as<int32_t>(), B, width, stream_),
                                    "slot state scatter kernel"));
  }
  return absl::OkStatus();
}

}  // namespace rnnserve::engine::cuda
