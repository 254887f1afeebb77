// Recurrent kernels against PyTorch (nn.LSTM/GRU/RNN with packed sequences, float64) and
// onnxruntime (ONNX activations with alpha/beta, clip, input_forget, peepholes,
// linear_before_reset, reverse): ONNX semantics, per-sequence lengths, initial states.
// Each case runs on one thread and on the per-thread unit split.

#include <functional>
#include <string>
#include <vector>

#include "engine/cpu/recurrent.h"
#include "gtest/gtest.h"
#include "tests/unit/cpu_test_util.h"

namespace rnnserve {
namespace {

using cpu_test::Case;
using cpu_test::Direction;
using cpu_test::LoadCase;
using cpu_test::Slice;
using engine::Activation;
using engine::ActivationKind;
using engine::CellType;
using engine::RecurrentSpec;
using engine::Tensor;
using testing::AllClose;
using testing::ToFloatTensor;

RecurrentSpec SpecFor(const Case& c, CellType cell, int dirs) {
  RecurrentSpec spec;
  spec.cell = cell;
  const auto& W = c.at("W0");
  spec.input_size = static_cast<int>(W.shape[1]);
  spec.hidden_size = static_cast<int>(W.shape[0]) / spec.gates();
  if (c.count("P0")) spec.proj_size = static_cast<int>(c.at("P0").shape[0]);
  spec.return_sequences = true;
  spec.return_state = true;
  spec.masking = engine::MaskSemantics::kOnnx;
  for (int d = 0; d < dirs; ++d) {
    spec.directions.push_back(Direction(c, d));
    // A simple RNN's one activation is f; PyTorch's and ONNX's default is tanh.
    if (cell == CellType::kSimpleRnn)
      spec.directions.back().f = Activation::Of(ActivationKind::kTanh);
    spec.directions.back().reverse = d == 1;
  }
  return spec;
}

// Per-direction states [dirs, B, n] as the kernel's state list (h, c per direction).
std::vector<Tensor> InitialStates(const Case& c, int dirs, bool lstm) {
  std::vector<Tensor> out;
  if (!c.count("h0")) return out;
  for (int d = 0; d < dirs; ++d) {
    out.push_back(ToFloatTensor(Slice(c.at("h0"), d)));
    if (lstm) out.push_back(ToFloatTensor(Slice(c.at("c0"), d)));
  }
  return out;
}

struct Threads : ::testing::TestWithParam<int> {
  // Runs the case and checks y (as `y_layout` says), hN and cN.
  void Check(const std::string& name, RecurrentSpec spec, bool onnx_stacked_y) {
    const Case c = LoadCase(name);
    ASSERT_FALSE(c.empty());
    const int dirs = static_cast<int>(spec.directions.size());
    const bool lstm = spec.cell == CellType::kLstm;
    if (onnx_stacked_y && dirs == 2) spec.merge = engine::MergeMode::kNone;
    auto kernel = engine::cpu::RecurrentKernel::Create(spec, name, {.num_threads = GetParam()});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<Tensor> out, finals;
    const auto status = (*kernel)->Run(ToFloatTensor(c.at("x")), cpu_test::Lengths(c), {},
                                       InitialStates(c, dirs, lstm), &out, &finals);
    ASSERT_TRUE(status.ok()) << status;
    int next = 0;
    if (onnx_stacked_y) {
      for (int d = 0; d < dirs; ++d) {
        EXPECT_TRUE(AllClose(out[next++], Slice(c.at("y"), d))) << "y of direction " << d;
      }
    } else {
      EXPECT_TRUE(AllClose(out[next++], c.at("y"))) << "y";
    }
    for (int d = 0; d < dirs; ++d) {
      EXPECT_TRUE(AllClose(out[next++], Slice(c.at("hN"), d))) << "h of direction " << d;
      if (lstm && c.count("cN")) {
        EXPECT_TRUE(AllClose(out[next], Slice(c.at("cN"), d))) << "c of direction " << d;
      }
      next += lstm ? 1 : 0;
    }
    ASSERT_EQ(static_cast<int>(finals.size()), dirs * (lstm ? 2 : 1));
  }
};

TEST_P(Threads, TorchLstmMixedLengthsZeroPastEnd) {
  const Case c = LoadCase("TorchLstm");
  Check("TorchLstm", SpecFor(c, CellType::kLstm, 1), false);
}
TEST_P(Threads, TorchLstmBidirectionalBackwardPlacedAtTimeIndex) {
  const Case c = LoadCase("TorchLstmBidirectional");
  Check("TorchLstmBidirectional", SpecFor(c, CellType::kLstm, 2), false);
}
TEST_P(Threads, TorchLstmProjSizeProjectsStateAndOutput) {
  const Case c = LoadCase("TorchLstmProj");
  Check("TorchLstmProj", SpecFor(c, CellType::kLstm, 1), false);
}
TEST_P(Threads, TorchLstmBidirectionalProjSize) {
  const Case c = LoadCase("TorchLstmBidirectionalProj");
  Check("TorchLstmBidirectionalProj", SpecFor(c, CellType::kLstm, 2), false);
}
TEST_P(Threads, TorchGruResetAfter) {
  const Case c = LoadCase("TorchGru");
  Check("TorchGru", SpecFor(c, CellType::kGru, 1), false);
}
TEST_P(Threads, TorchGruBidirectional) {
  const Case c = LoadCase("TorchGruBidirectional");
  Check("TorchGruBidirectional", SpecFor(c, CellType::kGru, 2), false);
}
TEST_P(Threads, TorchRnnTanh) {
  const Case c = LoadCase("TorchRnnTanh");
  Check("TorchRnnTanh", SpecFor(c, CellType::kSimpleRnn, 1), false);
}
TEST_P(Threads, TorchRnnReluBidirectional) {
  const Case c = LoadCase("TorchRnnReluBidirectional");
  RecurrentSpec spec = SpecFor(c, CellType::kSimpleRnn, 2);
  for (auto& d : spec.directions) d.f = Activation::Of(ActivationKind::kRelu);
  Check("TorchRnnReluBidirectional", spec, false);
}
TEST_P(Threads, TorchLstmWideUnitSplitWithRaggedSlices) {
  const Case c = LoadCase("TorchLstmWide");
  RecurrentSpec spec = SpecFor(c, CellType::kLstm, 1);
  Check("TorchLstmWide", spec, false);
}
TEST_P(Threads, TorchGruWideUnitSplitWithRaggedSlices) {
  const Case c = LoadCase("TorchGruWide");
  Check("TorchGruWide", SpecFor(c, CellType::kGru, 1), false);
}

struct OnnxAct {
  const char* name;
  Activation act;
};

TEST_P(Threads, OnnxRnnEveryActivationWithAlphaBeta) {
  const OnnxAct cases[] = {
      {"OnnxRnnRelu", Activation::Of(ActivationKind::kRelu)},
      {"OnnxRnnSigmoid", Activation::Of(ActivationKind::kSigmoid)},
      {"OnnxRnnAffine", Activation::Of(ActivationKind::kAffine, 0.7f, -0.2f)},
      {"OnnxRnnLeakyRelu", Activation::Of(ActivationKind::kLeakyRelu, 0.1f)},
      {"OnnxRnnThresholdedRelu", Activation::Of(ActivationKind::kThresholdedRelu, 0.3f)},
      {"OnnxRnnScaledTanh", Activation::Of(ActivationKind::kScaledTanh, 1.3f, 0.6f)},
      {"OnnxRnnHardSigmoid", Activation::Of(ActivationKind::kHardSigmoid, 0.25f, 0.4f)},
      {"OnnxRnnElu", Activation::Of(ActivationKind::kElu, 0.8f)},
      {"OnnxRnnSoftsign", Activation::Of(ActivationKind::kSoftsign)},
      {"OnnxRnnSoftplus", Activation::Of(ActivationKind::kSoftplus)},
  };
  for (const OnnxAct& a : cases) {
    SCOPED_TRACE(a.name);
    const Case c = LoadCase(a.name);
    RecurrentSpec spec = SpecFor(c, CellType::kSimpleRnn, 1);
    spec.directions[0].f = a.act;
    Check(a.name, spec, true);
  }
}

TEST_P(Threads, OnnxLstmActivationsWithAlphaBeta) {
  const Case c = LoadCase("OnnxLstmActivationsWithAlphaBeta");
  RecurrentSpec spec = SpecFor(c, CellType::kLstm, 1);
  spec.directions[0].f = Activation::Of(ActivationKind::kHardSigmoid, 0.3f, 0.45f);
  spec.directions[0].g = Activation::Of(ActivationKind::kScaledTanh, 1.1f, 0.9f);
  spec.directions[0].h = Activation::Of(ActivationKind::kSoftsign);
  Check("OnnxLstmActivationsWithAlphaBeta", spec, true);
}

TEST_P(Threads, OnnxGruActivationsWithAlphaBeta) {
  const Case c = LoadCase("OnnxGruActivationsWithAlphaBeta");
  RecurrentSpec spec = SpecFor(c, CellType::kGru, 1);
  spec.reset_after = false;
  spec.directions[0].f = Activation::Of(ActivationKind::kHardSigmoid, 0.25f, 0.5f);
  spec.directions[0].g = Activation::Of(ActivationKind::kLeakyRelu, 0.2f);
  Check("OnnxGruActivationsWithAlphaBeta", spec, true);
}

TEST_P(Threads, OnnxLstmPeepholesClipInputForgetBidirectional) {
  const Case c = LoadCase("OnnxLstmPeepholesClipInputForget");
  RecurrentSpec spec = SpecFor(c, CellType::kLstm, 2);
  spec.clip = 0.9f;
  spec.input_forget = true;
  Check("OnnxLstmPeepholesClipInputForget", spec, true);
}

TEST_P(Threads, OnnxLstmPeepholesReverse) {
  const Case c = LoadCase("OnnxLstmPeepholesReverse");
  RecurrentSpec spec = SpecFor(c, CellType::kLstm, 1);
  spec.directions[0].reverse = true;
  Check("OnnxLstmPeepholesReverse", spec, true);
}

TEST_P(Threads, OnnxGruLinearBeforeResetFalseBidirectional) {
  const Case c = LoadCase("OnnxGruLinearBeforeResetFalse");
  RecurrentSpec spec = SpecFor(c, CellType::kGru, 2);
  spec.reset_after = false;
  Check("OnnxGruLinearBeforeResetFalse", spec, true);
}

TEST_P(Threads, OnnxGruLinearBeforeResetTrueReverse) {
  const Case c = LoadCase("OnnxGruLinearBeforeResetTrueReverse");
  RecurrentSpec spec = SpecFor(c, CellType::kGru, 1);
  spec.directions[0].reverse = true;
  Check("OnnxGruLinearBeforeResetTrueReverse", spec, true);
}

TEST_P(Threads, OnnxGruClipBoundsPreActivations) {
  const Case c = LoadCase("OnnxGruClip");
  RecurrentSpec spec = SpecFor(c, CellType::kGru, 1);
  spec.reset_after = false;
  spec.clip = 0.7f;
  Check("OnnxGruClip", spec, true);
}

INSTANTIATE_TEST_SUITE_P(CpuRecurrent, Threads, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "Threads"; });

TEST(CpuRecurrentErrors, WrongInitialStateShapeNamesLayerAndExpectedShape) {
  const Case c = LoadCase("TorchLstm");
  auto kernel = engine::cpu::RecurrentKernel::Create(SpecFor(c, CellType::kLstm, 1), "lstm_1");
  ASSERT_TRUE(kernel.ok());
  std::vector<Tensor> out;
  const std::vector<Tensor> bad = {Tensor::Float({4, 3}), Tensor::Float({4, 7})};
  const auto s = (*kernel)->Run(ToFloatTensor(c.at("x")), cpu_test::Lengths(c), {}, bad, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("lstm_1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[4,7]"), std::string::npos) << s;
}

TEST(CpuRecurrentErrors, LengthPastTimeAxisIsRejected) {
  const Case c = LoadCase("TorchGru");
  auto kernel = engine::cpu::RecurrentKernel::Create(SpecFor(c, CellType::kGru, 1), "gru");
  ASSERT_TRUE(kernel.ok());
  std::vector<Tensor> out;
  const auto s =
      (*kernel)->Run(ToFloatTensor(c.at("x")), std::vector<int32_t>{6, 7, 1, 1}, {}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("layer 'gru': lengths[1] = 7: must be in [0, 6]"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace rnnserve
