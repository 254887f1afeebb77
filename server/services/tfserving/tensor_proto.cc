#include "server/services/tfserving/tensor_proto.h"

#include "absl/strings/str_cat.h"
#include "server/tensor_codec.h"

namespace rnnserve::server::tfserving {
namespace {

using core::ElementType;

ElementType ElementTypeOf(int dtype) {
  switch (dtype) {
    case tensorflow::DT_FLOAT:
      return ElementType::kFp32;
    case tensorflow::DT_DOUBLE:
      return ElementType::kFp64;
    case tensorflow::DT_INT32:
      return ElementType::kInt32;
    case tensorflow::DT_INT64:
      return ElementType::kInt64;
    case tensorflow::DT_BOOL:
      return ElementType::kBool;
    case tensorflow::DT_UINT8:
      return ElementType::kUint8;
    case tensorflow::DT_HALF:
      return ElementType::kFp16;
    default:
      return ElementType::kInvalid;
  }
}

// The typed field that holds `dtype`'s values as they lie in memory, or empty with `why` set
// when that field cannot be viewed as the tensor's bytes.
absl::string_view TypedValues(const tensorflow::TensorProto& proto, std::string* field) {
  switch (proto.dtype()) {
    case tensorflow::DT_FLOAT:
      return core::BytesOf(proto.float_val());
    case tensorflow::DT_DOUBLE:
      return core::BytesOf(proto.double_val());
    case tensorflow::DT_INT32:
      return core::BytesOf(proto.int_val());
    case tensorflow::DT_INT64:
      return core::BytesOf(proto.int64_val());
    case tensorflow::DT_BOOL:
      return core::BytesOf(proto.bool_val());
    case tensorflow::DT_HALF:
      if (!proto.half_val().empty()) *field = "half_val";
      return {};
    case tensorflow::DT_UINT8:
      if (!proto.int_val().empty()) *field = "int_val";
      return {};
    default:
      return {};
  }
}

}  // namespace

std::string DataTypeName(int dtype) {
  if (tensorflow::DataType_IsValid(dtype)) {
    return tensorflow::DataType_Name(static_cast<tensorflow::DataType>(dtype));
  }
  return absl::StrCat("DataType ", dtype);
}

tensorflow::DataType DataTypeOf(engine::DType dtype) {
  return dtype == engine::DType::kInt64 ? tensorflow::DT_INT64 : tensorflow::DT_FLOAT;
}

absl::StatusOr<core::InputView> ViewOf(const std::string& name,
                                       const tensorflow::TensorProto& proto) {
  const std::string what = absl::StrCat("input '", name, "'");
  core::InputView view{.name = name, .type = ElementTypeOf(proto.dtype())};
  if (view.type == ElementType::kInvalid) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": dtype ", DataTypeName(proto.dtype()),
                     " is not served; expected DT_FLOAT (or DT_INT32 / DT_INT64 token ids)"));
  }
  if (proto.tensor_shape().unknown_rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": tensor_shape has unknown_rank; expected its dimensions"));
  }
  for (const auto& dim : proto.tensor_shape().dim()) {
    if (dim.size() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": tensor_shape has dimension ", dim.size(), "; expected sizes >= 0"));
    }
    view.shape.push_back(dim.size());
  }
  if (!proto.tensor_content().empty()) {
    view.bytes = proto.tensor_content();
    return view;
  }
  std::string field;
  view.bytes = TypedValues(proto, &field);
  if (!field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", DataTypeName(proto.dtype()),
                                                   " values in ", field,
                                                   " are not read; send them as tensor_content"));
  }
  return view;
}

void SetShape(const engine::Shape& shape, tensorflow::TensorShapeProto* proto) {
  proto->Clear();
  for (int64_t d : shape) proto->add_dim()->set_size(d);
}

engine::Tensor Allocate(engine::DType dtype, const engine::Shape& shape,
                        tensorflow::TensorProto* proto) {
  proto->Clear();
  proto->set_dtype(DataTypeOf(dtype));
  SetShape(shape, proto->mutable_tensor_shape());
  return WrapRepeated(dtype, shape, proto->mutable_float_val(), proto->mutable_int64_val());
}

void Encode(const engine::Tensor& tensor, tensorflow::TensorProto* proto) {
  if (InRepeated(tensor, proto->float_val(), proto->int64_val())) return;  // Allocate()'s
  proto->Clear();
  proto->set_dtype(DataTypeOf(tensor.dtype()));
  SetShape(tensor.shape(), proto->mutable_tensor_shape());
  AppendRepeated(tensor, proto->mutable_float_val(), proto->mutable_int64_val());
}

}  // namespace rnnserve::server::tfserving
