#include "server/inspect.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "engine/cudnn_support.h"
#include "engine/engine.h"
#include "engine/ir.h"
#include "models/model_loader.h"
#include "server/model_probe.h"
#include "server/servable.h"

namespace rnnserve::server {
namespace {

using Json = nlohmann::json;
using namespace engine;  // NOLINT: a .cc file that only describes IR types

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

std::string Describe(const LayerSpec& spec) {
  return std::visit(
      Overloaded{
          [](const RecurrentSpec& r) {
            const RecurrentDirection& d = r.directions[0];
            std::string dir = r.directions.size() == 2
                                  ? absl::StrCat("bidirectional merge=", MergeModeName(r.merge))
                              : d.reverse ? "reverse"
                                          : "forward";
            std::string acts = r.cell == CellType::kLstm
                                   ? absl::StrCat(ActivationName(d.f), "/", ActivationName(d.g),
                                                  "/", ActivationName(d.h))
                               : r.cell == CellType::kGru
                                   ? absl::StrCat(ActivationName(d.f), "/", ActivationName(d.g))
                                   : ActivationName(d.f);
            std::string s = absl::StrCat(CellTypeName(r.cell), " in=", r.input_size,
                                         " units=", r.hidden_size, " ", dir, " act=", acts);
            if (r.cell == CellType::kGru) absl::StrAppend(&s, " reset_after=", r.reset_after);
            if (r.proj_size) absl::StrAppend(&s, " proj=", r.proj_size);
            if (r.clip != 0) absl::StrAppend(&s, " clip=", r.clip);
            if (!d.peephole.empty()) absl::StrAppend(&s, " peepholes");
            if (r.input_forget) absl::StrAppend(&s, " input_forget");
            if (r.return_sequences) absl::StrAppend(&s, " return_sequences");
            if (r.return_state) absl::StrAppend(&s, " return_state");
            absl::StrAppend(&s, " masking=", MaskSemanticsName(r.masking));
            return s;
          },
          [](const DenseSpec& d) {
            return absl::StrCat("Dense ", d.in, "->", d.out, " ", ActivationName(d.activation),
                                d.bias.empty() ? " no-bias" : "");
          },
          [](const MaskingSpec& m) { return absl::StrCat("mask_value=", m.mask_value); },
          [](const EmbeddingSpec& e) {
            return absl::StrCat("vocab=", e.vocab, " dim=", e.dim, e.mask_zero ? " mask_zero" : "");
          },
          [](const ActivationSpec& a) { return ActivationName(a.activation); },
          [](const Conv1DSpec& c) {
            return absl::StrCat(c.in_channels, "->", c.out_channels, " kernel=", c.kernel_size,
                                " stride=", c.stride, " dilation=", c.dilation, " ",
                                ActivationName(c.activation));
          },
          [](const IdentitySpec&) { return std::string("identity at inference"); },
          [](const UnsupportedSpec& u) { return absl::StrCat("UNSUPPORTED: ", u.reason); },
          [](const auto&) { return std::string(); },
      },
      spec);
}

// Where a layer runs on a GPU node, and why.
std::string GpuPlacement(const LayerSpec& spec) {
  if (const auto* r = std::get_if<RecurrentSpec>(&spec)) {
    const absl::Status s = engine::CudnnSupports(*r);
    return s.ok() ? "cuDNN" : absl::StrCat("not cuDNN: ", s.message(), "; runs on the CPU engine");
  }
  return "GPU engine";
}

// The outputs' dtypes and shapes as the server learns them at load (Servable::ProbeSignature): the
// CPU engine runs a probe of 1 sequence of 2 steps and one of 2 of 3; an axis that differs is
// dynamic (-1).
absl::StatusOr<std::vector<ValueInfo>> ProbeOutputs(const Model& model) {
  std::vector<TensorSignature> inputs;
  for (const ValueInfo& v : model.inputs) {
    if (v.shape.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("input '", v.name, "' has no known rank"));
    }
    inputs.push_back({.name = v.name, .dtype = v.dtype, .shape = v.shape});
  }
  auto cpu = Engine::Create(EngineOptions{.kind = EngineKind::kCpu});
  if (!cpu.ok()) return cpu.status();
  auto compiled = (*cpu)->Compile(model, CompileOptions{.num_threads = 1});
  if (!compiled.ok()) return compiled.status();
  std::vector<Tensor> a, b;
  if (auto s = (*compiled)->Run(ProbeBatch(inputs, 1, 2), &a); !s.ok()) return s;
  if (auto s = (*compiled)->Run(ProbeBatch(inputs, 2, 3), &b); !s.ok()) return s;
  std::vector<ValueInfo> outputs = model.outputs;
  for (size_t i = 0; i < outputs.size() && i < a.size(); ++i) {
    Shape shape = a[i].shape();
    for (size_t d = 0; d < shape.size(); ++d) {
      if (i >= b.size() || d >= b[i].shape().size() || b[i].shape()[d] != shape[d]) shape[d] = -1;
    }
    outputs[i].dtype = a[i].dtype();
    outputs[i].shape = std::move(shape);
  }
  return outputs;
}

}  // namespace

int RunInspect(int argc, char** argv) {
  std::string path;
  models::LoadOptions options;
  bool json = false;
  CLI::App app(
      "The architecture rnnserve runs for a model file, read locally (no server): "
      "layers, sizes, activations, masking, and where each layer runs on a GPU node",
      "rnnserve inspect");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("FILE", path,
                 "the model file (.h5, .keras or .onnx), or a SavedModel directory (holding "
                 "saved_model.pb)")
      ->required();
  app.add_option("--architecture", options.architecture_json_path,
                 "a Keras architecture JSON, for a weights-only .h5");
  app.add_flag("--json", json, "print JSON instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto model = models::LoadModelFile(path, options);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s: %s\n", absl::StatusCodeToString(model.status().code()).c_str(),
                 std::string(model.status().message()).c_str());
    return 1;
  }
  auto shape = [](const ValueInfo& v) { return ShapeString(v.shape); };
  // The outputs as the server sees them, or, where the CPU engine cannot run the model, as the
  // file declares them (a shape the file leaves out is unknown, and the reason is shown).
  const absl::StatusOr<std::vector<ValueInfo>> probed = ProbeOutputs(*model);
  const std::vector<ValueInfo>& outputs = probed.ok() ? *probed : model->outputs;
  auto unknown = [&](const ValueInfo& o) {
    return probed.ok() || !o.shape.empty() ? std::string() : std::string(probed.status().message());
  };
  if (json) {
    Json out = {{"file", path},
                {"format", model->source_format},
                {"producer", model->producer},
                {"name", model->name}};
    for (const auto& in : model->inputs) {
      out["inputs"].push_back(
          {{"name", in.name}, {"dtype", DTypeName(in.dtype)}, {"shape", in.shape}});
    }
    for (const auto& o : outputs) {
      Json info = {{"name", o.name}, {"dtype", DTypeName(o.dtype)}, {"shape", o.shape}};
      if (!unknown(o).empty()) info["shape_unknown"] = unknown(o);
      out["outputs"].push_back(info);
    }
    out["layers"] = Json::array();
    for (const Layer& l : model->layers) {
      out["layers"].push_back({{"name", l.name},
                               {"class", l.source_class},
                               {"details", Describe(l.spec)},
                               {"cpu", "CPU engine"},
                               {"gpu", GpuPlacement(l.spec)}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s: %s model '%s' (%s)\n", path.c_str(), model->source_format.c_str(),
              model->name.c_str(), model->producer.c_str());
  for (const auto& in : model->inputs) {
    std::printf("  input  %-20s %-6s %s\n", in.name.c_str(), DTypeName(in.dtype).c_str(),
                shape(in).c_str());
  }
  for (const auto& o : outputs) {
    std::printf("  output %-20s %-6s %s\n", o.name.c_str(), DTypeName(o.dtype).c_str(),
                unknown(o).empty() ? ShapeString(o.shape).c_str()
                                   : absl::StrCat("shape unknown: ", unknown(o)).c_str());
  }
  std::printf("  layers:\n");
  for (const Layer& l : model->layers) {
    std::printf("    %-22s %-18s %s\n", l.name.c_str(), l.source_class.c_str(),
                Describe(l.spec).c_str());
    std::printf("    %-22s %-18s cpu: CPU engine; gpu: %s\n", "", "", GpuPlacement(l.spec).c_str());
  }
  return 0;
}

}  // namespace rnnserve::server
