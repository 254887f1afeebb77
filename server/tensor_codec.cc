#include "server/tensor_codec.h"

#include <algorithm>

namespace rnnserve::server {
namespace {

core::ElementType ElementTypeOf(v1::DataType dtype) {
  using core::ElementType;
  constexpr std::pair<v1::DataType, ElementType> kTypes[] = {
      {v1::TYPE_BOOL, ElementType::kBool},   {v1::TYPE_UINT8, ElementType::kUint8},
      {v1::TYPE_INT32, ElementType::kInt32}, {v1::TYPE_INT64, ElementType::kInt64},
      {v1::TYPE_FP16, ElementType::kFp16},   {v1::TYPE_FP32, ElementType::kFp32},
      {v1::TYPE_FP64, ElementType::kFp64}};
  for (const auto& [wire, type] : kTypes) {
    if (wire == dtype) return type;
  }
  return ElementType::kInvalid;
}

}  // namespace

core::InputView ViewOf(const std::string& name, const v1::Tensor& proto) {
  core::InputView view{.name = name,
                       .type = ElementTypeOf(proto.dtype()),
                       .shape = engine::Shape(proto.shape().begin(), proto.shape().end())};
  if (!proto.raw_content().empty()) {
    view.bytes = proto.raw_content();
  } else if (proto.dtype() == v1::TYPE_FP32) {
    view.bytes = core::BytesOf(proto.float_val());
  } else if (proto.dtype() == v1::TYPE_INT32) {
    view.bytes = core::BytesOf(proto.int_val());
  } else if (proto.dtype() == v1::TYPE_INT64) {
    view.bytes = core::BytesOf(proto.int64_val());
  } else if (proto.dtype() == v1::TYPE_FP64) {
    view.bytes = core::BytesOf(proto.double_val());
  }
  return view;
}

std::vector<core::InputView> ViewsOf(const WireTensors& inputs) {
  std::vector<core::InputView> views;
  views.reserve(inputs.size());
  for (const auto& [name, tensor] : inputs) views.push_back(ViewOf(name, tensor));
  return views;
}

core::Request DecodePredict(const v1::PredictRequest& request) {
  core::Request out{
      .inputs = ViewsOf(request.inputs()),
      .lengths = {request.lengths().begin(), request.lengths().end()},
      .output_filter = {request.output_filter().begin(), request.output_filter().end()}};
  for (const auto& [layer, states] : request.initial_states()) {
    std::vector<core::InputView>& views = out.initial_states[layer];
    for (const v1::Tensor& t : states.states()) views.push_back(ViewOf(layer, t));
  }
  return out;
}

absl::StatusOr<engine::Tensor> DecodeTensor(const v1::Tensor& proto, const std::string& what) {
  auto t = core::ToEngineTensor(ViewOf(what, proto), /*token_ids=*/false, what);
  if (!t.ok() || !t->wrapped()) return t;
  return engine::Tensor(*t);  // a copy of its own: the caller may keep it past the message
}

v1::DataType WireType(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? v1::TYPE_INT64 : v1::TYPE_FP32;
}

engine::Tensor WrapRepeated(engine::DType dtype, const engine::Shape& shape,
                            google::protobuf::RepeatedField<float>* floats,
                            google::protobuf::RepeatedField<int64_t>* ints) {
  const int n = static_cast<int>(engine::NumElements(shape));
  void* data = nullptr;
  if (dtype == engine::DType::kInt64) {
    ints->Resize(n, 0);
    data = ints->mutable_data();
  } else {
    floats->Resize(n, 0.0f);
    data = floats->mutable_data();
  }
  return engine::Tensor::Wrap(dtype, shape, data, nullptr);
}

bool InRepeated(const engine::Tensor& tensor, const google::protobuf::RepeatedField<float>& floats,
                const google::protobuf::RepeatedField<int64_t>& ints) {
  if (tensor.num_elements() == 0) return false;
  return tensor.dtype() == engine::DType::kInt64 ? ints.data() == tensor.i64()
                                                 : floats.data() == tensor.f32();
}

void AppendRepeated(const engine::Tensor& tensor, google::protobuf::RepeatedField<float>* floats,
                    google::protobuf::RepeatedField<int64_t>* ints) {
  if (tensor.dtype() == engine::DType::kInt64) {
    ints->Add(tensor.i64(), tensor.i64() + tensor.num_elements());
  } else {
    floats->Add(tensor.f32(), tensor.f32() + tensor.num_elements());
  }
}

engine::Tensor Unsent(engine::DType dtype, const engine::Shape& shape) {
  return dtype == engine::DType::kInt64 ? engine::Tensor::Int64(shape)
                                        : engine::Tensor::Float(shape);
}

engine::Tensor AllocateTensor(engine::DType dtype, const engine::Shape& shape, v1::Tensor* proto) {
  proto->Clear();
  proto->set_dtype(WireType(dtype));
  for (int64_t d : shape) proto->add_shape(d);
  return WrapRepeated(dtype, shape, proto->mutable_float_val(), proto->mutable_int64_val());
}

void EncodeTensor(const engine::Tensor& tensor, v1::Tensor* proto) {
  if (InRepeated(tensor, proto->float_val(), proto->int64_val())) return;  // AllocateTensor's
  proto->Clear();
  proto->set_dtype(WireType(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto->add_shape(d);
  AppendRepeated(tensor, proto->mutable_float_val(), proto->mutable_int64_val());
}

namespace {

bool Wanted(const google::protobuf::RepeatedPtrField<std::string>& filter,
            const std::string& name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

}  // namespace

void EncodeOutputs(const Servable& model,
                   const google::protobuf::RepeatedPtrField<std::string>& filter,
                   const std::vector<engine::Tensor>& outputs, WireTensors* out) {
  for (size_t i = 0; i < outputs.size() && i < model.outputs().size(); ++i) {
    const std::string& name = model.outputs()[i].name;
    if (Wanted(filter, name)) EncodeTensor(outputs[i], &(*out)[name]);
  }
}

OutputAllocator AllocateOutputs(const Servable& model,
                                const google::protobuf::RepeatedPtrField<std::string>& filter,
                                WireTensors* out) {
  return [&model, &filter, out](int i, engine::DType dtype, const engine::Shape& shape) {
    const std::string& name = model.outputs()[i].name;
    if (!Wanted(filter, name)) return Unsent(dtype, shape);
    return AllocateTensor(dtype, shape, &(*out)[name]);
  };
}

}  // namespace rnnserve::server
