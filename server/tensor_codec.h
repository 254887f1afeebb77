#pragma once

// rnnserve.v1 wire tensors <-> the request core (server/core/request.h). Decoding makes views
// over the message's values (raw_content, or the typed field the dtype names): the message
// must outlive the request's run. It knows nothing of any model; validation is the core's.

#include <string>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "rnnserve/v1/rnnserve.pb.h"
#include "server/core/request.h"
#include "server/servable.h"

namespace rnnserve::server {

using WireTensors = google::protobuf::Map<std::string, v1::Tensor>;

// A view over `proto`'s values under `name`.
core::InputView ViewOf(const std::string& name, const v1::Tensor& proto);
// Views of `inputs` (a Predict's, an Evaluate's, a stream chunk's).
std::vector<core::InputView> ViewsOf(const WireTensors& inputs);
// A Predict's inputs, lengths, output filter and initial states as a core request.
core::Request DecodePredict(const v1::PredictRequest& request);

// A wire tensor (FP32, INT32 or INT64) as an engine tensor; `what` names it in errors
// ("targets 'y'").
absl::StatusOr<engine::Tensor> DecodeTensor(const v1::Tensor& proto, const std::string& what);

// Float tensors as TYPE_FP32 float_val, int tensors as TYPE_INT64 int64_val. Values that
// AllocateTensor placed in `proto` already stay where they are.
void EncodeTensor(const engine::Tensor& tensor, v1::Tensor* proto);
// `proto` as `dtype` and `shape` with room for its values, and an engine tensor over them (for
// RunOptions::allocate_outputs): EncodeTensor of that tensor copies nothing.
engine::Tensor AllocateTensor(engine::DType dtype, const engine::Shape& shape, v1::Tensor* proto);

v1::DataType WireType(engine::DType dtype);

// Typed repeated fields as output buffers, for every front end whose messages carry FP32 values
// in a repeated float and INT64 in a repeated int64 (rnnserve.v1, TF Serving's TensorProto):
// `floats` or `ints` (as `dtype` says) resized to `shape`'s values, and an engine tensor over
// them.
engine::Tensor WrapRepeated(engine::DType dtype, const engine::Shape& shape,
                            google::protobuf::RepeatedField<float>* floats,
                            google::protobuf::RepeatedField<int64_t>* ints);
// Whether WrapRepeated placed `tensor` in those fields (then it is written in place already).
bool InRepeated(const engine::Tensor& tensor, const google::protobuf::RepeatedField<float>& floats,
                const google::protobuf::RepeatedField<int64_t>& ints);
// `tensor`'s values appended to `floats` or `ints`.
void AppendRepeated(const engine::Tensor& tensor, google::protobuf::RepeatedField<float>* floats,
                    google::protobuf::RepeatedField<int64_t>* ints);
// A tensor of its own, for an output the front end does not send.
engine::Tensor Unsent(engine::DType dtype, const engine::Shape& shape);

using OutputFilter = google::protobuf::RepeatedPtrField<std::string>;
// `model`'s outputs that `filter` names (all when empty) into `out`, by name.
void EncodeOutputs(const Servable& model, const OutputFilter& filter,
                   const std::vector<engine::Tensor>& outputs, WireTensors* out);
// For RunOptions::allocate_outputs: the outputs `filter` names go straight into `out`, so that
// EncodeOutputs then copies nothing. `model`, `filter` and `out` must outlive the run.
OutputAllocator AllocateOutputs(const Servable& model, const OutputFilter& filter,
                                WireTensors* out);

}  // namespace rnnserve::server
