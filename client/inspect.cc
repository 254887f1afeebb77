// rnnserve-cli inspect FILE: the architecture rnnserve runs for a model file, read locally with
// the same importer the server uses: layers, sizes, activations, masking semantics, and where
// each layer can run and why.

#include <cstdio>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_commands.h"
#include "engine/cuda/cudnn_support.h"
#include "engine/ir.h"
#include "models/model_loader.h"

namespace rnnserve::client {
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
    const absl::Status s = cuda::CudnnSupports(*r);
    return s.ok() ? "cuDNN" : absl::StrCat("not cuDNN: ", s.message(), "; runs on the CPU engine");
  }
  return "GPU engine";
}

}  // namespace

int InspectCommand(const Args& args) {
  if (args.positional.size() != 1) {
    std::fprintf(stderr, "inspect needs one FILE (.h5, .keras or .onnx)\n");
    return 2;
  }
  const std::string& path = args.positional[0];
  models::LoadOptions options;
  options.architecture_json_path = args.Get("architecture");
  auto model = models::LoadModelFile(path, options);
  if (!model.ok()) return Fail(model.status());
  auto shape = [](const ValueInfo& v) { return ShapeString(v.shape); };
  if (args.Has("json")) {
    Json out = {{"file", path},
                {"format", model->source_format},
                {"producer", model->producer},
                {"name", model->name}};
    for (const auto& in : model->inputs) {
      out["inputs"].push_back(
          {{"name", in.name}, {"dtype", DTypeName(in.dtype)}, {"shape", in.shape}});
    }
    for (const auto& o : model->outputs) out["outputs"].push_back({{"name", o.name}});
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
  for (const auto& o : model->outputs) std::printf("  output %s\n", o.name.c_str());
  std::printf("  layers:\n");
  for (const Layer& l : model->layers) {
    std::printf("    %-22s %-18s %s\n", l.name.c_str(), l.source_class.c_str(),
                Describe(l.spec).c_str());
    std::printf("    %-22s %-18s cpu: CPU engine; gpu: %s\n", "", "", GpuPlacement(l.spec).c_str());
  }
  return 0;
}

}  // namespace rnnserve::client
