// Servable's step-level (cellular) batching: whether the model can run that way, what a chunk
// needs to know about it, and starting the scheduler (server/batching/cellular_scheduler.h).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/log.h"
#include "server/model_probe.h"
#include "server/servable.h"

namespace rnnserve::server {
namespace {

// Steps per chunk when config.pbtxt leaves chunk_steps 0. A CPU chunk's hand-off costs a few
// microseconds, so short chunks cost little; a GPU chunk's (launches, copies of inputs, outputs
// and states, the synchronisation) costs about as much as tens of steps of a small model.
constexpr int kDefaultCpuChunkSteps = 8;
constexpr int kDefaultGpuChunkSteps = 32;

// The signature with every time axis free, so probes may choose T (a model trained on
// fixed windows runs chunks shorter than its window).
std::vector<TensorSignature> FreeTimeAxes(std::vector<TensorSignature> inputs) {
  for (TensorSignature& s : inputs) {
    if (s.shape.size() >= 2) s.shape[1] = -1;
  }
  return inputs;
}

}  // namespace

absl::StatusOr<batching::ChunkShape> Servable::ProbeChunkShape() {
  batching::ChunkShape shape;
  for (const TensorSignature& s : inputs_) shape.input_time_axis.push_back(s.shape.size() >= 2);
  const std::vector<TensorSignature> free = FreeTimeAxes(inputs_);
  std::vector<engine::Tensor> two, three;
  engine::Batch probe = ProbeBatch(free, 1, 2);
  batching::LayerStates states;
  probe.final_states = &states;
  if (auto s = RunProbe(probe, &two); !s.ok()) return s;
  if (auto s = RunProbe(ProbeBatch(free, 1, 3), &three); !s.ok()) return s;
  // A per-step output follows the input's time axis: T=2 and T=3 give 2 and 3 steps.
  for (size_t o = 0; o < two.size() && o < three.size(); ++o) {
    shape.output_time_axis.push_back(two[o].rank() >= 2 && two[o].dim(1) == 2 &&
                                     three[o].rank() >= 2 && three[o].dim(1) == 3);
  }
  for (const auto& [layer, tensors] : states) {
    for (const engine::Tensor& t : tensors) {
      shape.state_rows[layer].emplace_back(t.shape().begin() + 1, t.shape().end());
    }
  }
  return shape;
}

absl::Status Servable::WarmUpCellularGpu(const batching::CellularSchedulerOptions& options) {
  // Chunks run every batch size up to the slots, at chunk_steps steps, from slot states as the
  // scheduler's do: each is timed here once (the GPU engine chooses its algorithms per batch
  // size and step bucket), not by the first requests.
  const std::vector<TensorSignature> free = FreeTimeAxes(inputs_);
  for (size_t i = 0; i < instances_.size(); ++i) {
    if (!instances_[i]->times_kernels_per_shape()) continue;
    auto slots = engine::NewSlotStates(instances_[i].get(), options.shape.state_rows,
                                       options.max_active_sequences);
    if (!slots.ok()) return slots.status();
    std::vector<int32_t> rows;
    for (int B = 1; B <= options.max_active_sequences; ++B) {
      rows.push_back(B - 1);
      engine::Batch chunk = ProbeBatch(free, B, options.chunk_steps);
      chunk.continues = true;
      std::vector<engine::Tensor> out;
      if (auto st = (*slots)->Run(std::move(chunk), rows, &out); !st.ok()) {
        return absl::Status(st.code(),
                            absl::StrCat(source_file_, ": warm-up chunk of ", B, "x",
                                         options.chunk_steps, " failed: ", st.message()));
      }
    }
    instance_info_[i].layers = instances_[i]->placements();
  }
  return absl::OkStatus();
}

absl::Status Servable::StartCellular() {
  const v1::ModelCellularBatching& c = config_.cellular_batching();
  const std::string model = absl::StrCat("model ", name(), ": ");
  // Settings first, then what the model allows.
  if (config_.has_dynamic_batching()) {
    return absl::InvalidArgumentError(absl::StrCat(
        model, "config.pbtxt asks for both dynamic_batching and cellular_batching; keep one"));
  }
  if (c.max_active_sequences() < 0 || c.chunk_steps() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(model,
                     "cellular_batching.max_active_sequences and chunk_steps must be >= 0 (0: the "
                     "default); were ",
                     c.max_active_sequences(), " and ", c.chunk_steps()));
  }
  if (max_batch_size() > 0 && c.max_active_sequences() > max_batch_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(model, "cellular_batching.max_active_sequences (", c.max_active_sequences(),
                     ") must not exceed max_batch_size (", max_batch_size(), ")"));
  }
  if (max_batch_size() <= 0) {
    return absl::FailedPreconditionError(
        "cellular batching needs max_batch_size > 0 (a batch axis to stack sequences on)");
  }
  if (!streamable_.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cellular batching needs a causal model: ", streamable_.message()));
  }
  for (const TensorSignature& s : inputs_) {
    if (s.shape.size() < 2) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cellular batching needs a time axis on every input; '", s.name, "' has none"));
    }
  }
  auto shape = ProbeChunkShape();
  if (!shape.ok()) return shape.status();
  for (size_t o = 0; o < shape->output_time_axis.size() && o < outputs_.size(); ++o) {
    if (shape->output_time_axis[o] && masking_ != "keras") {
      return absl::FailedPreconditionError(absl::StrCat(
          "cellular batching of per-step outputs needs Keras masking (a masked step repeats "
          "the last output); output '",
          outputs_[o].name, "' is per-step under ", masking_, " masking"));
    }
  }
  bool gpu = false;
  for (const auto& i : instances_) gpu |= i->times_kernels_per_shape();
  const int default_chunk = gpu ? kDefaultGpuChunkSteps : kDefaultCpuChunkSteps;
  batching::CellularSchedulerOptions options{
      .model_name = name(),
      .max_active_sequences =
          c.max_active_sequences() > 0 ? c.max_active_sequences() : max_batch_size(),
      .chunk_steps = c.chunk_steps() > 0 ? c.chunk_steps() : default_chunk,
      .max_queue_size = c.max_queue_size(),
      .fixed_chunk_steps = gpu,
      .shape = *std::move(shape),
      .resident_step_loop = c.resident_step_loop(),
      .resident_max_steps = c.resident_max_steps() != 0 ? c.resident_max_steps() : 512};
  if (auto st = WarmUpCellularGpu(options); !st.ok()) return st;
  auto scheduler = batching::CellularScheduler::Create(options, InstancePointers());
  if (!scheduler.ok()) return scheduler.status();
  cellular_ = scheduler->get();
  cellular_->SetObserver([this](const batching::ChunkStats& stats) {
    // The observer runs before the chunk's finished (or, on an error, all its) sequences give
    // their slots back: those are not in use any more, and an idle model reads 0.
    const int64_t leaving = stats.status.ok() ? stats.finished : stats.active;
    recorder_.ObserveChunk(stats, std::max<int64_t>(0, cellular_->active() - leaving));
  });
  scheduler_ = *std::move(scheduler);
  LogInfo(absl::StrCat(
      "model ", name(), " v", version_, ": cellular batching, ", options.max_active_sequences,
      " slots per instance, ",
      cellular_->resident() ? absl::StrCat("resident step loop (sequences of up to ",
                                           options.resident_max_steps, " steps)")
                            : absl::StrCat("chunks of up to ", options.chunk_steps, " steps"),
      ", ", instances_.size(), " instance(s)",
      options.resident_step_loop && !cellular_->resident()
          ? absl::StrCat("; resident_step_loop: chunks (", cellular_->resident_note(), ")")
          : ""));
  return absl::OkStatus();
}

}  // namespace rnnserve::server
