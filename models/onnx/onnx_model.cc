#include "models/onnx/onnx_model.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/onnx/onnx.pb.h"
#include "models/onnx/onnx_graph.h"
#include "models/onnx/onnx_tensor.h"

namespace rnnserve::models::onnx {
namespace {

using engine::DType;

absl::Status Prefixed(const std::string& name, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
}

// What a file that is not a ModelProto looks like, for a clearer error.
std::string ForeignFormat(const std::string& bytes) {
  if (absl::StartsWith(bytes, "\x89HDF\r\n\x1a\n")) return "an HDF5 file (Keras .h5?)";
  if (absl::StartsWith(bytes, "PK\x03\x04")) return "a zip archive (Keras .keras or PyTorch .pt?)";
  if (absl::StartsWith(bytes, "\x80\x02") || absl::StartsWith(bytes, "\x80\x04")) {
    return "a Python pickle (PyTorch .pt/.pth? export it with torch.onnx.export)";
  }
  if (absl::StartsWith(bytes, "ir_version") || absl::StartsWith(bytes, "{")) {
    return "text, not a binary ONNX model";
  }
  return "";
}

// The traced batch axis of a graph input or output, where its declared rank has it.
int BatchAxisOf(const std::map<std::string, int>& traced, const engine::ValueInfo& info) {
  const auto it = traced.find(info.name);
  if (it == traced.end() || it->second >= static_cast<int>(info.shape.size())) return 0;
  return it->second;
}

absl::StatusOr<engine::ValueInfo> ValueInfoOf(const ValueInfoProto& v) {
  engine::ValueInfo info;
  info.name = v.name();
  if (!v.has_type() || !v.type().has_tensor_type()) {
    return absl::InvalidArgumentError(
        absl::StrCat("graph value '", v.name(), "' has no tensor type"));
  }
  const TypeProto::Tensor& t = v.type().tensor_type();
  switch (t.elem_type()) {
    case TensorProto::FLOAT:
    case TensorProto::DOUBLE:
    case TensorProto::FLOAT16:
      info.dtype = DType::kFloat32;
      break;
    case TensorProto::INT64:
    case TensorProto::INT32:
      info.dtype = DType::kInt64;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("graph value '", v.name(), "' has element type ",
                       OnnxTypeName(t.elem_type()), "; expected FLOAT or an integer type"));
  }
  for (const TensorShapeProto::Dimension& d : t.shape().dim()) {
    info.shape.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
  }
  return info;
}

absl::StatusOr<engine::Model> ImportGraph(const ModelProto& proto, const std::string& name) {
  if (!proto.has_graph()) return absl::InvalidArgumentError("the model has no graph");
  int opset = -1;
  for (const OperatorSetIdProto& o : proto.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = static_cast<int>(o.version());
  }
  if (opset < 1) {
    return absl::InvalidArgumentError("the model imports no default-domain (ai.onnx) opset");
  }
  const GraphProto& graph = proto.graph();
  engine::Model model;
  model.name = graph.name().empty() ? std::filesystem::path(name).stem().string() : graph.name();
  model.source_format = "onnx";
  model.producer =
      absl::StrCat(proto.producer_name(), " ", proto.producer_version(), " (opset ", opset, ")");
  GraphBuilder builder(&model, opset);

  std::set<std::string> initializer_names;
  for (const TensorProto& init : graph.initializer()) {
    const std::string what = absl::StrCat("initializer '", init.name(), "'");
    auto t = TensorFromProto(init, what);
    if (!t.ok()) return t.status();
    for (float v : t->floats()) {
      if (v != v) return absl::InvalidArgumentError(absl::StrCat(what, " holds NaN values"));
    }
    if (auto s = builder.Bind(init.name(), Ref{.constant = std::move(*t)}); !s.ok()) return s;
    initializer_names.insert(init.name());
  }
  const BatchAxes batch_axes = FindBatchAxes(graph);
  for (const ValueInfoProto& in : graph.input()) {
    if (initializer_names.count(in.name())) continue;  // IR < 4 lists initializers as inputs
    auto info = ValueInfoOf(in);
    if (!info.ok()) return info.status();
    info->batch_axis = BatchAxisOf(batch_axes.inputs, *info);
    const int id = builder.NewValue();
    model.inputs.push_back(std::move(*info));
    if (auto s = builder.Bind(in.name(), Ref{.id = id}); !s.ok()) return s;
  }
  if (model.inputs.empty()) return absl::InvalidArgumentError("the graph has no runtime inputs");
  for (const NodeProto& node : graph.node()) {
    if (auto s = ImportNode(node, &builder); !s.ok()) return s;
  }
  std::set<int> used;
  for (const ValueInfoProto& out : graph.output()) {
    auto info = ValueInfoOf(out);
    if (!info.ok()) return info.status();
    info->batch_axis = BatchAxisOf(batch_axes.outputs, *info);
    auto ref = builder.Resolve(out.name());
    if (!ref.ok()) return ref.status();
    auto id = builder.Materialize(*ref, "output/" + out.name());
    if (!id.ok()) return id.status();
    // An output that is a model input or another output gets its own value.
    if (*id < static_cast<int>(model.inputs.size()) || used.count(*id)) {
      engine::Layer copy = NewLayer("output/" + out.name(), "onnx::Identity");
      copy.spec = engine::IdentitySpec{};
      copy.inputs = {*id};
      copy.outputs = {builder.NewValue()};
      id = copy.outputs[0];
      builder.AddLayer(std::move(copy));
    }
    used.insert(*id);
    model.outputs.push_back(std::move(*info));
    model.output_values.push_back(*id);
  }
  if (model.outputs.empty()) return absl::InvalidArgumentError("the graph has no outputs");
  DropUnusedTensorOps(&model);
  return model;
}

}  // namespace

absl::StatusOr<engine::Model> LoadOnnxBytes(const std::string& bytes, const std::string& name) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": the file is empty"));
  if (const std::string foreign = ForeignFormat(bytes); !foreign.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not an ONNX model; the file is ", foreign));
  }
  ModelProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": not a valid ONNX model (protobuf parsing failed; truncated or corrupt file?)"));
  }
  if (proto.ir_version() <= 0 || !proto.has_graph()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": not an ONNX model (no ir_version or graph; truncated or corrupt file?)"));
  }
  auto model = ImportGraph(proto, name);
  if (!model.ok()) return Prefixed(name, model.status());
  if (auto s = model->Validate(); !s.ok()) return Prefixed(name, s);
  return model;
}

absl::StatusOr<engine::Model> LoadOnnxFile(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", ec.message()));
  if (static_cast<int64_t>(size) >= kMaxOnnxFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes is past ONNX's 2 GiB limit"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (!in && !in.eof()) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  return LoadOnnxBytes(buf.str(), path);
}

}  // namespace rnnserve::models::onnx
