// PyTorch's nn.LSTM / nn.GRU / nn.RNN (packed sequences of mixed lengths, float64 answers from
// models/scripts/gpu_make_torch_fixtures.py) against the GPU engine in exact FP32, with the IR
// built straight from the module's state_dict: PyTorch's gate orders are the IR's, and packed
// sequences have ONNX semantics (zeros past the length, states at the last valid step).
// Covers what cuDNN runs beyond the Keras corpus: projection, stacked bidirectional layers,
// relu RNNs, wider hidden sizes.

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_model.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/torch_state_dict.h"
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
  // The fixture's first `rows` sequences (0: all) through the engine; its placements after the
  // runs into *placements where given.
  void Check(engine::EngineKind kind, int rows = 0,
             std::vector<engine::LayerPlacement>* placements = nullptr) {
    if (GetParam() == "NoTorchFixtures") {
      GTEST_SKIP() << "no fixtures under tests/fixtures/torch (models/scripts/"
                      "gpu_make_torch_fixtures.py makes them)";
    }
    const std::string dir = absl::StrCat("tests/fixtures/torch/", GetParam(), "/");
    auto model = TorchFixtureModel(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    auto compiled = CompileOn(kind, *model);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    if (kind == engine::EngineKind::kCuda) {
      for (const auto& p : (*compiled)->placements()) {
        EXPECT_EQ(p.engine, "cuda") << p.layer << ": " << p.reason;
      }
    }
    const client::NpyArray input = LoadNpy(dir + "input_0.npy");
    const client::NpyArray lengths = LoadNpy(dir + "lengths.npy");
    const int B = rows > 0 ? rows : static_cast<int>(input.shape[0]);
    std::vector<int> identity(B), reversed(B);
    for (int b = 0; b < B; ++b) identity[b] = b, reversed[b] = B - 1 - b;
    // The GPU engine runs a shape eagerly, then captures it whole, then replays the graph: the
    // same batch three times, then its rows reversed (other data, same shape), each time
    // PyTorch's numbers.
    const int runs = kind == engine::EngineKind::kCuda ? 4 : 1;
    for (int run = 0; run < runs; ++run) {
      SCOPED_TRACE(absl::StrCat("run ", run));
      const std::vector<int>& order = run < 3 ? identity : reversed;
      engine::Batch batch;
      batch.inputs.push_back(ToFloatTensor(Rows(input, 0, order)));
      const client::NpyArray l = Rows(lengths, 0, order);
      batch.lengths.assign(l.values.begin(), l.values.end());
      std::vector<Tensor> out;
      const absl::Status s = (*compiled)->Run(batch, &out);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_TRUE(AllClose(out[0], Rows(LoadNpy(dir + "expected_0.npy"), 0, order), kFp32Exact))
          << "output";
      const bool lstm = fs::exists(SourcePath(dir + "expected_2.npy"));
      const int per = lstm ? 2 : 1;
      const int n_states = (static_cast<int>(out.size()) - 1) / per;
      EXPECT_TRUE(AllClose(Stack(out, 1, per, n_states),
                           Rows(LoadNpy(dir + "expected_1.npy"), 1, order), kFp32Exact))
          << "h_n";
      if (lstm) {
        EXPECT_TRUE(AllClose(Stack(out, 2, per, n_states),
                             Rows(LoadNpy(dir + "expected_2.npy"), 1, order), kFp32Exact))
            << "c_n";
      }
    }
    if (kind == engine::EngineKind::kCuda) {
      // The third run at least replayed the graph (the fourth too unless cuDNN's own
      // algorithm baked the first order's lengths in).
      EXPECT_GE((*compiled)->counters().graph_replays, 1);
    }
    if (placements != nullptr) *placements = (*compiled)->placements();
  }
};

TEST_P(TorchFixtureTest, GpuMatchesPyTorchInExactFp32) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  Check(engine::EngineKind::kCuda);
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchFixtureTest, ::testing::ValuesIn(TorchCases()),
                         [](const auto& info) { return info.param; });

// Stacked one-direction layers (2 and 3) through the GPU model at batches the stacked kernel takes
// (CudnnRecurrent::ForwardStack: one launch where it timed faster than the layers apart):
// eager, captured and replayed, rows reversed, each time PyTorch's numbers; the lower layer's
// placement says how the pair ran.
class TorchStackTest : public TorchFixtureTest {};

TEST_P(TorchStackTest, StackedLayersMatchPyTorchThroughTheModel) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  for (int rows : {1, 3}) {
    SCOPED_TRACE(absl::StrCat("B=", rows));
    std::vector<engine::LayerPlacement> placements;
    Check(engine::EngineKind::kCuda, rows, &placements);
    ASSERT_GE(placements.size(), 2u);
    EXPECT_NE(placements[0].reason.find("with the layers above"), std::string::npos)
        << placements[0].reason;
    std::cout << placements[0].layer << ": " << placements[0].reason << std::endl;
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchStackTest,
                         ::testing::Values("TorchLstmStackH128", "TorchGruStackH128",
                                           "TorchLstmStack3H128"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rnnserve::testing
