#pragma once

// IR models from the PyTorch fixtures of models/scripts/gpu_make_torch_fixtures.py: the
// module's state_dict (weights.npz) as a chain of recurrent layers. PyTorch's gate orders are
// the IR's; packed sequences have ONNX semantics (zeros past the length, states at the last
// valid step).

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "engine/ir.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {

inline std::vector<float> Floats(const client::NpyArray& a) {
  return std::vector<float>(a.values.begin(), a.values.end());
}

// The rows `order` of a fixture array whose batch axis is `axis`, in that order (for every
// index of the axes before it, e.g. each layer and direction of PyTorch's h_n [L*dirs, B, H]).
inline client::NpyArray Rows(const client::NpyArray& a, int axis, const std::vector<int>& order) {
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < a.shape.size(); ++d) inner *= a.shape[d];
  for (int d = 0; d < axis; ++d) outer *= a.shape[d];
  const int64_t rows = a.shape[axis];
  client::NpyArray out = a;
  out.shape[axis] = static_cast<int64_t>(order.size());
  out.values.clear();
  for (int64_t o = 0; o < outer; ++o) {
    const auto base = a.values.begin() + o * rows * inner;
    for (int r : order)
      out.values.insert(out.values.end(), base + r * inner, base + (r + 1) * inner);
  }
  return out;
}

// The first `batch` entries of such an array: PyTorch computes each sequence on its own, so its
// answers for the first `batch` sequences are the answers for a batch of those.
inline client::NpyArray FirstSequences(const client::NpyArray& a, int axis, int batch) {
  std::vector<int> order(batch);
  for (int r = 0; r < batch; ++r) order[r] = r;
  return Rows(a, axis, order);
}

// Outputs: the last layer's sequence, then (h, c) per layer and direction in h_n's order.
inline absl::StatusOr<engine::Model> ModelFromStateDict(
    const std::map<std::string, client::NpyArray>& sd) {
  auto it = sd.find("config");
  if (it == sd.end() || it->second.values.size() != 6) {
    return absl::InvalidArgumentError("weights.npz has no config [6]");
  }
  const auto& cfg = it->second.values;
  const int cell = static_cast<int>(cfg[0]), I = static_cast<int>(cfg[1]),
            H = static_cast<int>(cfg[2]), proj = static_cast<int>(cfg[3]),
            layers = static_cast<int>(cfg[4]), dirs = cfg[5] != 0 ? 2 : 1;
  engine::Model m;
  m.name = "torch";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, I}});
  int next = 1, prev = 0;
  std::vector<int> states;
  for (int l = 0; l < layers; ++l) {
    engine::RecurrentSpec spec;
    spec.cell = cell == 0   ? engine::CellType::kLstm
                : cell == 1 ? engine::CellType::kGru
                            : engine::CellType::kSimpleRnn;
    spec.input_size = l == 0 ? I : dirs * (proj > 0 ? proj : H);
    spec.hidden_size = H;
    spec.proj_size = proj;
    spec.return_sequences = true;
    spec.return_state = true;
    spec.masking = engine::MaskSemantics::kOnnx;
    for (int d = 0; d < dirs; ++d) {
      const std::string sfx = absl::StrCat("_l", l, d == 1 ? "_reverse" : "");
      engine::RecurrentDirection dir;
      dir.reverse = d == 1;
      if (cell >= 2) {
        dir.f = engine::Activation::Of(cell == 2 ? engine::ActivationKind::kTanh
                                                 : engine::ActivationKind::kRelu);
      }
      for (const auto& [name, dst] : {std::pair{"weight_ih", &dir.W},
                                      {"weight_hh", &dir.R},
                                      {"bias_ih", &dir.bW},
                                      {"bias_hh", &dir.bR}}) {
        auto w = sd.find(absl::StrCat(name, sfx));
        if (w == sd.end()) return absl::InvalidArgumentError(absl::StrCat("no ", name, sfx));
        *dst = Floats(w->second);
      }
      if (proj > 0) dir.P = Floats(sd.at(absl::StrCat("weight_hr", sfx)));
      spec.directions.push_back(std::move(dir));
    }
    engine::Layer layer{absl::StrCat("layer", l), "torch", spec, {prev}, {}};
    layer.outputs.push_back(next++);
    for (int d = 0; d < dirs; ++d) {
      for (int k = 0; k < (cell == 0 ? 2 : 1); ++k) {
        states.push_back(next);
        layer.outputs.push_back(next++);
      }
    }
    prev = layer.outputs[0];
    m.layers.push_back(std::move(layer));
  }
  m.output_values.push_back(prev);
  for (int s : states) m.output_values.push_back(s);
  m.outputs.resize(m.output_values.size());
  m.num_values = next;
  return m;
}

// The model of tests/fixtures/torch/<case>/ (`dir` relative to the source tree, ending in /).
inline absl::StatusOr<engine::Model> TorchFixtureModel(const std::string& dir) {
  auto sd = client::ReadNpz(SourcePath(dir + "weights.npz"));
  if (!sd.ok()) return sd.status();
  return ModelFromStateDict(*sd);
}

// A fixture of one recurrent layer: its folder (relative to the source tree, ending in /), the
// layer, and how many sequences it holds.
struct TorchLayerFixture {
  std::string dir;
  engine::RecurrentSpec spec;
  int sequences = 0;
};

// tests/fixtures/torch/<name>/, which must hold one recurrent layer.
inline absl::StatusOr<TorchLayerFixture> LoadTorchLayerFixture(const std::string& name) {
  TorchLayerFixture f{.dir = "tests/fixtures/torch/" + name + "/"};
  auto model = TorchFixtureModel(f.dir);
  if (!model.ok()) return model.status();
  if (model->layers.size() != 1 ||
      !std::holds_alternative<engine::RecurrentSpec>(model->layers[0].spec)) {
    return absl::InvalidArgumentError(name + ": not one recurrent layer");
  }
  f.spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  f.sequences = static_cast<int>(LoadNpy(f.dir + "lengths.npy").shape[0]);
  return f;
}

// One-layer LSTM and GRU fixtures of mixed lengths (3 to 8 sequences) at the widths the cluster
// and register kernels are compiled for (H = 128, 256, 512), for the tests that pin those
// kernels.
inline const std::vector<std::string>& KernelWidthFixtures() {
  static const std::vector<std::string> names = {"TorchLstmWideHidden",  "TorchLstmClusterH256",
                                                 "TorchLstmClusterH512", "TorchGruClusterH128",
                                                 "TorchGruClusterH256",  "TorchGruClusterH512"};
  return names;
}

}  // namespace rnnserve::testing
