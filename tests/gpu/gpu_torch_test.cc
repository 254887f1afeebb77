// PyTorch's nn.LSTM / nn.GRU / nn.RNN (packed sequences of mixed lengths, float64 answers from
// models/scripts/gpu_make_torch_fixtures.py) against the GPU engine in exact FP32, with the IR
// built straight from the module's state_dict: PyTorch's gate orders are the IR's, and packed
// sequences have ONNX semantics (zeros past the length, states at the last valid step).
// Covers what cuDNN runs beyond the Keras corpus: projection, stacked bidirectional layers,
// relu RNNs, wider hidden sizes. The CPU engine is checked against the same answers.

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using engine::Tensor;

std::vector<std::string> TorchCases() {
  std::vector<std::string> names;
  const fs::path root = SourcePath("tests/fixtures/torch");
  if (fs::is_directory(root)) {
    for (const auto& e : fs::directory_iterator(root)) {
      if (fs::exists(e.path() / "weights.npz")) names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("NoTorchFixtures");
  return names;
}

std::vector<float> Floats(const client::NpyArray& a) {
  return std::vector<float>(a.values.begin(), a.values.end());
}

// The stacked module as a chain of IR layers; outputs: the last layer's sequence, then
// (h, c) per layer and direction in PyTorch's h_n order.
absl::StatusOr<engine::Model> ModelFromStateDict(
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
    spec.cell = cell == 0 ? engine::CellType::kLstm
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
      for (const auto& [name, dst] : {std::pair{"weight_ih", &dir.W}, {"weight_hh", &dir.R},
                                      {"bias_ih", &dir.bW}, {"bias_hh", &dir.bR}}) {
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

// Stacks the per-layer, per-direction states [B, size] into PyTorch's [L*dirs, B, size].
Tensor Stack(const std::vector<Tensor>& out, int first, int step, int count) {
  const engine::Shape s = out[first].shape();
  Tensor t = Tensor::Float({count, s[0], s[1]});
  for (int i = 0; i < count; ++i) {
    const Tensor& src = out[first + i * step];
    std::copy_n(src.f32(), src.num_elements(), t.f32() + i * src.num_elements());
  }
  return t;
}

class TorchFixtureTest : public ::testing::TestWithParam<std::string> {
 protected:
  void Check(engine::EngineKind kind) {
    if (GetParam() == "NoTorchFixtures") {
      GTEST_SKIP() << "no fixtures under tests/fixtures/torch (models/scripts/"
                      "gpu_make_torch_fixtures.py makes them)";
    }
    const std::string dir = absl::StrCat("tests/fixtures/torch/", GetParam(), "/");
    auto sd = client::ReadNpz(SourcePath(dir + "weights.npz"));
    ASSERT_TRUE(sd.ok()) << sd.status();
    auto model = ModelFromStateDict(*sd);
    ASSERT_TRUE(model.ok()) << model.status();
    auto compiled = CompileOn(kind, *model);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    if (kind == engine::EngineKind::kCuda) {
      for (const auto& p : (*compiled)->placements()) {
        EXPECT_EQ(p.engine, "cuda") << p.layer << ": " << p.reason;
      }
    }
    engine::Batch batch;
    batch.inputs.push_back(ToFloatTensor(LoadNpy(dir + "input_0.npy")));
    const auto lengths = LoadNpy(dir + "lengths.npy");
    batch.lengths.assign(lengths.values.begin(), lengths.values.end());
    std::vector<Tensor> out;
    const absl::Status s = (*compiled)->Run(batch, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(AllClose(out[0], LoadNpy(dir + "expected_0.npy"))) << "output";
    const bool lstm = fs::exists(SourcePath(dir + "expected_2.npy"));
    const int per = lstm ? 2 : 1;
    const int n_states = (static_cast<int>(out.size()) - 1) / per;
    EXPECT_TRUE(AllClose(Stack(out, 1, per, n_states), LoadNpy(dir + "expected_1.npy"))) << "h_n";
    if (lstm) {
      EXPECT_TRUE(AllClose(Stack(out, 2, per, n_states), LoadNpy(dir + "expected_2.npy")))
          << "c_n";
    }
  }
};

TEST_P(TorchFixtureTest, GpuMatchesPyTorchInExactFp32) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  Check(engine::EngineKind::kCuda);
}

TEST_P(TorchFixtureTest, CpuMatchesPyTorch) { Check(engine::EngineKind::kCpu); }

INSTANTIATE_TEST_SUITE_P(Torch, TorchFixtureTest, ::testing::ValuesIn(TorchCases()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rnnserve::testing
