// Recurrent layers behind Keras Masking against Keras 2 (tf_keras) and Keras 3, float64:
// a masked step keeps the state and repeats the last output, go_backwards keeps processing
// order, Bidirectional zeroes masked outputs and merges with concat/sum/mul/ave/none,
// masks with masked steps inside a sequence, hard_sigmoid in its Keras 2 and Keras 3 forms,
// GRU reset_after true and false. The whole model runs through the CPU engine.

#include <string>
#include <vector>

#include "engine/engine.h"
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
using engine::MergeMode;
using engine::RecurrentSpec;
using engine::Tensor;
using testing::AllClose;
using testing::ToFloatTensor;

struct KerasOptions {
  CellType cell = CellType::kLstm;
  bool go_backwards = false;
  bool bidirectional = false;
  MergeMode merge = MergeMode::kConcat;
  bool return_sequences = true;
  bool return_state = true;
  bool reset_after = true;
  Activation f = Activation::Of(ActivationKind::kSigmoid);
  Activation g = Activation::Of(ActivationKind::kTanh);
};

RecurrentSpec KerasSpec(const Case& c, const KerasOptions& o) {
  RecurrentSpec spec;
  spec.cell = o.cell;
  spec.input_size = static_cast<int>(c.at("W0").shape[1]);
  spec.hidden_size = static_cast<int>(c.at("W0").shape[0]) / spec.gates();
  spec.return_sequences = o.return_sequences;
  spec.return_state = o.return_state;
  spec.reset_after = o.reset_after;
  spec.merge = o.merge;
  spec.masking = engine::MaskSemantics::kKeras;
  // Keras's Bidirectional zeroes the masked outputs of its layers when they return sequences.
  spec.zero_output_for_mask = o.bidirectional && o.return_sequences;
  const int dirs = o.bidirectional ? 2 : 1;
  for (int d = 0; d < dirs; ++d) {
    engine::RecurrentDirection dir = Direction(c, d);
    // Keras SimpleRNN's one activation is its `activation` (f here).
    dir.f = o.cell == CellType::kSimpleRnn ? o.g : o.f;
    dir.g = o.g;
    dir.h = o.g;
    dir.reverse = o.go_backwards || d == 1;
    dir.outputs_in_processing_order = o.go_backwards;
    spec.directions.push_back(std::move(dir));
  }
  return spec;
}

// input -> Masking(0) -> the recurrent layer; outputs every value the layer writes.
engine::Model MaskedModel(const RecurrentSpec& spec, int num_outputs) {
  engine::Model m;
  m.name = "keras_case";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, spec.input_size}});
  m.layers.push_back({"masking", "Masking", engine::MaskingSpec{0.0f}, {0}, {1}});
  engine::Layer rnn{"rnn", "RNN", spec, {1}, {}};
  for (int i = 0; i < num_outputs; ++i) {
    rnn.outputs.push_back(2 + i);
    m.outputs.push_back({"out" + std::to_string(i), engine::DType::kFloat32, {}});
    m.output_values.push_back(2 + i);
  }
  m.layers.push_back(std::move(rnn));
  m.num_values = 2 + num_outputs;
  return m;
}

std::vector<Tensor> RunKeras(const Case& c, const RecurrentSpec& spec, int num_outputs,
                             int threads = 0) {
  auto engine = engine::Engine::Create({});
  EXPECT_TRUE(engine.ok());
  auto compiled = (*engine)->Compile(MaskedModel(spec, num_outputs), {.num_threads = threads});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  engine::Batch batch;
  batch.inputs.push_back(ToFloatTensor(c.at("x")));
  std::vector<Tensor> out;
  const auto s = (*compiled)->Run(batch, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// y, then h (and c) of the one direction.
void CheckUnidirectional(const std::string& name, const KerasOptions& o) {
  const Case c = LoadCase(name);
  ASSERT_FALSE(c.empty());
  const bool lstm = o.cell == CellType::kLstm;
  const auto out = RunKeras(c, KerasSpec(c, o), lstm ? 3 : 2);
  ASSERT_EQ(out.size(), lstm ? 3u : 2u);
  EXPECT_TRUE(AllClose(out[0], c.at("y"))) << "y";
  EXPECT_TRUE(AllClose(out[1], Slice(c.at("hN"), 0))) << "h";
  if (lstm) EXPECT_TRUE(AllClose(out[2], Slice(c.at("cN"), 0))) << "c";
}

TEST(CpuKerasRecurrent, LstmMaskedStepsRepeatLastOutput) {
  CheckUnidirectional("KerasLstmMaskedRepeatsLastOutput", {});
}

TEST(CpuKerasRecurrent, LstmGoBackwardsOutputsInProcessingOrder) {
  CheckUnidirectional("KerasLstmGoBackwardsOutputsInProcessingOrder", {.go_backwards = true});
}

TEST(CpuKerasRecurrent, GruResetAfterFalseMatchesKeras2) {
  CheckUnidirectional("KerasGruResetAfterFalse", {.cell = CellType::kGru, .reset_after = false});
}

TEST(CpuKerasRecurrent, GruResetAfterTrue) {
  CheckUnidirectional("KerasGruResetAfterTrue", {.cell = CellType::kGru, .reset_after = true});
}

TEST(CpuKerasRecurrent, SimpleRnnTanh) {
  CheckUnidirectional("KerasSimpleRnn", {.cell = CellType::kSimpleRnn});
}

TEST(CpuKerasRecurrent, HardSigmoidKeras2IsPointTwoXPlusHalf) {
  CheckUnidirectional("KerasLstmHardSigmoidKeras2", {.f = Activation::HardSigmoidKeras2()});
}

TEST(CpuKerasRecurrent, ReluActivationAppliesToCandidateAndOutput) {
  CheckUnidirectional("KerasLstmReluActivation", {.g = Activation::Of(ActivationKind::kRelu)});
}

TEST(CpuKerasRecurrent, LstmInteriorMaskedStepsKeepState) {
  CheckUnidirectional("KerasLstmInteriorMaskKeepsState", {});
}

TEST(CpuKerasRecurrent, GruInteriorMaskedStepsKeepState) {
  CheckUnidirectional("KerasGruInteriorMaskKeepsState",
                      {.cell = CellType::kGru, .reset_after = false});
}

TEST(CpuKerasRecurrent, GoBackwardsWithInteriorMask) {
  CheckUnidirectional("KerasLstmGoBackwardsInteriorMask", {.go_backwards = true});
}

TEST(CpuKerasRecurrent, InteriorMaskOnTwoThreads) {
  const Case c = LoadCase("KerasLstmInteriorMaskKeepsState");
  const auto out = RunKeras(c, KerasSpec(c, {}), 3, 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(AllClose(out[0], c.at("y")));
}

TEST(CpuKerasRecurrent, HardSigmoidKeras3IsXOverSixPlusHalf) {
  const Case c = LoadCase("Keras3LstmHardSigmoid");
  KerasOptions o{.return_state = false, .f = Activation::HardSigmoidKeras3()};
  const auto out = RunKeras(c, KerasSpec(c, o), 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(AllClose(out[0], c.at("y")));
}

TEST(CpuKerasRecurrent, BidirectionalEveryMergeModeSequencesAndLast) {
  const std::pair<const char*, MergeMode> merges[] = {{"Concat", MergeMode::kConcat},
                                                      {"Sum", MergeMode::kSum},
                                                      {"Mul", MergeMode::kMul},
                                                      {"Ave", MergeMode::kAve},
                                                      {"None", MergeMode::kNone}};
  for (const auto& [mname, merge] : merges) {
    for (CellType cell : {CellType::kLstm, CellType::kGru}) {
      for (bool seqs : {true, false}) {
        const std::string name = std::string("KerasBidirectional") +
                                 (cell == CellType::kLstm ? "Lstm" : "Gru") + mname +
                                 (seqs ? "Sequences" : "Last");
        SCOPED_TRACE(name);
        const Case c = LoadCase(name);
        ASSERT_FALSE(c.empty());
        KerasOptions o{.cell = cell,
                       .bidirectional = true,
                       .merge = merge,
                       .return_sequences = seqs,
                       .return_state = false};
        const int n = merge == MergeMode::kNone ? 2 : 1;
        const auto out = RunKeras(c, KerasSpec(c, o), n);
        ASSERT_EQ(static_cast<int>(out.size()), n);
        EXPECT_TRUE(AllClose(out[0], c.at("y")));
        if (n == 2) EXPECT_TRUE(AllClose(out[1], c.at("y2")));
      }
    }
  }
}

TEST(CpuKerasRecurrent, MergedMasksAreAnded) {
  const Case c = LoadCase("KerasMergeMaskIsAnd");
  ASSERT_FALSE(c.empty());
  RecurrentSpec spec = KerasSpec(c, {.return_sequences = false, .return_state = false});
  engine::Model m;
  m.name = "merge_mask";
  m.inputs = {{"a", engine::DType::kFloat32, {-1, -1, 3}},
              {"b", engine::DType::kFloat32, {-1, -1, 2}}};
  m.layers.push_back({"mask_a", "Masking", engine::MaskingSpec{0.0f}, {0}, {2}});
  m.layers.push_back({"mask_b", "Masking", engine::MaskingSpec{0.0f}, {1}, {3}});
  m.layers.push_back({"concat", "Concatenate", engine::MergeSpec{}, {2, 3}, {4}});
  m.layers.push_back({"lstm", "LSTM", spec, {4}, {5}});
  m.outputs = {{"y", engine::DType::kFloat32, {}}};
  m.output_values = {5};
  m.num_values = 6;
  auto engine = engine::Engine::Create({});
  auto compiled = (*engine)->Compile(m, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  engine::Batch batch;
  batch.inputs = {ToFloatTensor(c.at("a")), ToFloatTensor(c.at("b"))};
  std::vector<Tensor> out;
  ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
  EXPECT_TRUE(AllClose(out[0], c.at("y")));
}

}  // namespace
}  // namespace rnnserve
