#include "server/services/kserve/model_config_view.h"

#include <algorithm>

#include "server/services/kserve/datatype.h"

namespace rnnserve::server::kserve {
namespace {

// The shape without the batch axis (`batch_axis`; -1: none, all dims are listed). An ONNX
// state [layers, batch, H] has its batch on axis 1, which Triton's dims cannot say: they list
// [layers, H].
template <typename Dims>
void AddDims(const engine::Shape& shape, int batch_axis, Dims* dims) {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int>(d) != batch_axis) dims->Add(shape[d]);
  }
}

}  // namespace

inference::ModelConfig TritonConfig(const Servable& servable) {
  const v1::ModelConfig& ours = servable.config();
  inference::ModelConfig out;
  out.set_name(servable.name());
  out.set_platform(servable.platform());
  out.set_backend("rnnserve");
  out.set_max_batch_size(ours.max_batch_size());
  out.set_default_model_filename(ours.default_model_filename());
  const bool batched = ours.max_batch_size() > 0;
  for (const TensorSignature& sig : servable.inputs()) {
    inference::ModelInput* in = out.add_input();
    in->set_name(sig.name);
    in->set_data_type(ConfigType(sig.dtype));
    AddDims(sig.shape, batched ? sig.batch_axis : -1, in->mutable_dims());
  }
  for (const TensorSignature& sig : servable.outputs()) {
    inference::ModelOutput* o = out.add_output();
    o->set_name(sig.name);
    o->set_data_type(ConfigType(sig.dtype));
    AddDims(sig.shape, batched ? sig.batch_axis : -1, o->mutable_dims());
  }
  for (const InstanceInfo& info : servable.instances()) {
    inference::ModelInstanceGroup* g = out.add_instance_group();
    g->set_count(1);
    g->set_kind(info.kind == "KIND_GPU" ? inference::ModelInstanceGroup::KIND_GPU
                                        : inference::ModelInstanceGroup::KIND_CPU);
  }
  if (ours.has_sequence_batching()) {
    inference::ModelSequenceBatching* sb = out.mutable_sequence_batching();
    sb->set_max_sequence_idle_microseconds(
        ours.sequence_batching().max_sequence_idle_microseconds());
    if (ours.has_dynamic_batching()) {
      // Triton's config holds dynamic_batching or sequence_batching, not both; a sequence
      // batcher that batches its sequences' requests dynamically is its "oldest" strategy.
      const v1::ModelDynamicBatching& db = ours.dynamic_batching();
      inference::ModelSequenceBatching::StrategyOldest* oldest = sb->mutable_oldest();
      oldest->set_max_candidate_sequences(ours.sequence_batching().max_sequences());
      oldest->mutable_preferred_batch_size()->CopyFrom(db.preferred_batch_size());
      oldest->set_max_queue_delay_microseconds(db.max_queue_delay_microseconds());
    }
  } else if (ours.has_dynamic_batching()) {
    const v1::ModelDynamicBatching& db = ours.dynamic_batching();
    inference::ModelDynamicBatching* d = out.mutable_dynamic_batching();
    d->mutable_preferred_batch_size()->CopyFrom(db.preferred_batch_size());
    d->set_max_queue_delay_microseconds(db.max_queue_delay_microseconds());
    d->set_priority_levels(db.priority_levels());
    d->set_default_priority_level(db.default_priority_level());
    d->mutable_default_queue_policy()->set_max_queue_size(
        static_cast<uint32_t>(std::max(0, db.max_queue_size())));
    d->mutable_default_queue_policy()->set_default_timeout_microseconds(
        db.default_timeout_microseconds());
  }
  for (const auto& [key, value] : ours.parameters()) {
    (*out.mutable_parameters())[key].set_string_value(value);
  }
  return out;
}

}  // namespace rnnserve::server::kserve
