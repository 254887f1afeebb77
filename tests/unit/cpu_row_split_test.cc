// The recurrent kernel's two ways of sharing a layer between threads (engine/cpu/recurrent.h),
// each forced, on 1, 2, 3 and 16 threads, against the real frameworks: batches of 9 rows with mixed
// lengths and initial states (PyTorch, packed sequences) and with masked steps inside the
// sequences (Keras 2 with Masking), LSTM, GRU reset_after true and false, SimpleRNN, one and two
// directions (fixtures: tests/unit/make_cpu_row_split_fixtures.py), and the PyTorch cases of
// the CPU conformance corpus (projection included; models/scripts/make_cpu_fixtures.py).

#include <string>
#include <tuple>
#include <vector>

#include "client/npy.h"
#include "engine/cpu/recurrent.h"
#include "engine/engine.h"
#include "gtest/gtest.h"
#include "tests/unit/cpu_test_util.h"

namespace rnnserve {
namespace {

using cpu_test::Case;
using cpu_test::Direction;
using cpu_test::Slice;
using engine::Activation;
using engine::ActivationKind;
using engine::CellType;
using engine::RecurrentSpec;
using engine::Tensor;
using engine::cpu::RecurrentKernel;
using engine::cpu::RecurrentSplit;
using testing::AllClose;
using testing::ToFloatTensor;

Case LoadRowsCase(const std::string& name) {
  auto c = client::ReadNpz(testing::SourcePath("tests/fixtures/cpu_rows/" + name + ".npz"));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : Case{};
}

struct CaseOptions {
  CellType cell = CellType::kLstm;
  bool keras = false;  // Keras masking (step mask from the all-zero steps), else lengths
  bool reset_after = true;
  bool go_backwards = false;
};

RecurrentSpec SpecFor(const Case& c, const CaseOptions& o) {
  RecurrentSpec spec;
  spec.cell = o.cell;
  spec.reset_after = o.reset_after;
  spec.input_size = static_cast<int>(c.at("W0").shape[1]);
  spec.hidden_size = static_cast<int>(c.at("W0").shape[0]) / spec.gates();
  if (c.count("P0")) spec.proj_size = static_cast<int>(c.at("P0").shape[0]);
  spec.return_sequences = true;
  spec.return_state = true;
  spec.masking = o.keras ? engine::MaskSemantics::kKeras : engine::MaskSemantics::kOnnx;
  const int dirs = c.count("W1") ? 2 : 1;
  for (int d = 0; d < dirs; ++d) {
    engine::RecurrentDirection dir = Direction(c, d);
    if (o.cell == CellType::kSimpleRnn) dir.f = Activation::Of(ActivationKind::kTanh);
    dir.reverse = d == 1 || o.go_backwards;
    dir.outputs_in_processing_order = o.go_backwards;
    spec.directions.push_back(std::move(dir));
  }
  if (dirs == 2) spec.merge = engine::MergeMode::kConcat;
  return spec;
}

class RowSplit : public ::testing::TestWithParam<std::tuple<RecurrentSplit, int>> {
 protected:
  // Runs the case with the split and threads of the parameter; checks y, hN and cN.
  void Check(const Case& c, const CaseOptions& o) {
    ASSERT_FALSE(c.empty());
    const auto [split, threads] = GetParam();
    const RecurrentSpec spec = SpecFor(c, o);
    auto kernel = RecurrentKernel::Create(spec, "rnn", {.num_threads = threads, .split = split});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const Tensor x = ToFloatTensor(c.at("x"));
    const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2);
    // The split asked for runs (the row split also at B < threads, one row per thread).
    EXPECT_EQ((*kernel)->UsesRowSplit(B), split == RecurrentSplit::kRows);
    std::vector<int32_t> lengths(B, static_cast<int32_t>(T));
    std::vector<uint8_t> mask;
    if (o.keras) {
      for (int64_t i = 0; i < B * T; ++i) {
        bool valid = false;
        for (int64_t f = 0; f < I; ++f) valid |= x.f32()[i * I + f] != 0.0f;
        mask.push_back(valid);
      }
    } else {
      lengths = cpu_test::Lengths(c);
    }
    const bool lstm = o.cell == CellType::kLstm;
    const int dirs = static_cast<int>(spec.directions.size());
    std::vector<Tensor> initial;
    for (int d = 0; d < dirs && c.count("h0"); ++d) {
      initial.push_back(ToFloatTensor(Slice(c.at("h0"), d)));
      if (lstm) initial.push_back(ToFloatTensor(Slice(c.at("c0"), d)));
    }
    std::vector<Tensor> out;
    // Twice: the second run reuses the scratch the first grew.
    for (int run = 0; run < 2; ++run) {
      const auto s = (*kernel)->Run(x, lengths, mask, initial, &out);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(static_cast<int>(out.size()), 1 + dirs * (lstm ? 2 : 1));
      EXPECT_TRUE(AllClose(out[0], c.at("y"))) << "y, run " << run;
      for (int d = 0; d < dirs; ++d) {
        const int at = 1 + d * (lstm ? 2 : 1);
        EXPECT_TRUE(AllClose(out[at], Slice(c.at("hN"), d))) << "h of direction " << d;
        if (lstm && c.count("cN")) {
          EXPECT_TRUE(AllClose(out[at + 1], Slice(c.at("cN"), d))) << "c of direction " << d;
        }
      }
    }
  }
};

TEST_P(RowSplit, KerasLstmRows48) { Check(LoadRowsCase("KerasLstmRows48"), {.keras = true}); }
TEST_P(RowSplit, KerasLstmRows16GoBackwards) {
  Check(LoadRowsCase("KerasLstmRows16GoBackwards"), {.keras = true, .go_backwards = true});
}
TEST_P(RowSplit, KerasGruRows48ResetAfter) {
  Check(LoadRowsCase("KerasGruRows48ResetAfter"), {.cell = CellType::kGru, .keras = true});
}
TEST_P(RowSplit, KerasGruRows32ResetBefore) {
  Check(LoadRowsCase("KerasGruRows32ResetBefore"),
        {.cell = CellType::kGru, .keras = true, .reset_after = false});
}
TEST_P(RowSplit, KerasSimpleRnnRows64) {
  Check(LoadRowsCase("KerasSimpleRnnRows64"), {.cell = CellType::kSimpleRnn, .keras = true});
}
TEST_P(RowSplit, TorchLstmRows64) { Check(LoadRowsCase("TorchLstmRows64"), {}); }
TEST_P(RowSplit, TorchGruRows48Bidirectional) {
  Check(LoadRowsCase("TorchGruRows48Bidirectional"), {.cell = CellType::kGru});
}
TEST_P(RowSplit, TorchRnnRows16) {
  Check(LoadRowsCase("TorchRnnRows16"), {.cell = CellType::kSimpleRnn});
}
// The CPU conformance corpus's PyTorch cases (tests/fixtures/cpu), B=4 with a length of 1.
TEST_P(RowSplit, TorchLstmProj) { Check(cpu_test::LoadCase("TorchLstmProj"), {}); }
TEST_P(RowSplit, TorchLstmBidirectionalProj) {
  Check(cpu_test::LoadCase("TorchLstmBidirectionalProj"), {});
}
TEST_P(RowSplit, TorchGruWide) {
  Check(cpu_test::LoadCase("TorchGruWide"), {.cell = CellType::kGru});
}
INSTANTIATE_TEST_SUITE_P(
    CpuRecurrent, RowSplit,
    ::testing::Combine(::testing::Values(RecurrentSplit::kRows, RecurrentSplit::kUnits),
                       ::testing::Values(1, 2, 3, 16)),  // 16: more workers than rows
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == RecurrentSplit::kRows ? "Rows" : "Units") +
             std::to_string(std::get<1>(info.param)) + "Threads";
    });

// Gives `spec` H units (weights of no interest: the chooser's tests run nothing).
void Resize(RecurrentSpec* spec, int H) {
  spec->hidden_size = H;
  auto& d = spec->directions[0];
  const int G = spec->gates();
  d.W.assign(static_cast<size_t>(G) * H * spec->input_size, 0.01f);
  d.R.assign(static_cast<size_t>(G) * H * H, 0.01f);
  d.bW.assign(G * H, 0.0f);
  d.bR.assign(G * H, 0.0f);
}

// The chooser: the row split where a batch has a row per thread, the unit split below, and
// the unit split always past kMaxRowSplitUnits; the metadata says which.
TEST(RowSplitChooser, RowsAtBatchesWithARowPerThreadUnitsBelowAndForWideLayers) {
  const Case c = LoadRowsCase("TorchLstmRows64");
  const RecurrentSpec spec = SpecFor(c, {});
  auto k2 = RecurrentKernel::Create(spec, "rnn", {.num_threads = 2});
  ASSERT_TRUE(k2.ok());
  EXPECT_TRUE((*k2)->UsesRowSplit(2));
  EXPECT_TRUE((*k2)->UsesRowSplit(32));
  EXPECT_TRUE((*k2)->UsesRowSplit(1));  // 4*64*64 = 16K multiply-adds: one thread either way
  EXPECT_EQ((*k2)->split_description().find("unit split"), std::string::npos);
  EXPECT_NE((*k2)->split_description().find("row split"), std::string::npos);

  // An LSTM of 256 units at B=1 on 2 threads: the unit split (256K multiply-adds a step).
  RecurrentSpec at_max = spec;
  Resize(&at_max, engine::cpu::kMaxRowSplitUnits);
  auto km = RecurrentKernel::Create(at_max, "at_max", {.num_threads = 2});
  ASSERT_TRUE(km.ok()) << km.status();
  EXPECT_FALSE((*km)->UsesRowSplit(1));
  EXPECT_TRUE((*km)->UsesRowSplit(2));
  EXPECT_NE((*km)->split_description().find("at batches of 2 rows or more"), std::string::npos)
      << (*km)->split_description();

  RecurrentSpec wide = spec;
  Resize(&wide, engine::cpu::kMaxRowSplitUnits + 1);
  auto kw = RecurrentKernel::Create(wide, "wide", {.num_threads = 2});
  ASSERT_TRUE(kw.ok()) << kw.status();
  EXPECT_FALSE((*kw)->UsesRowSplit(32));
  EXPECT_EQ((*kw)->split_description().find("row split"), std::string::npos);
  auto k1 =
      RecurrentKernel::Create(wide, "wide", {.num_threads = 2, .split = RecurrentSplit::kRows});
  ASSERT_TRUE(k1.ok());
  EXPECT_FALSE((*k1)->UsesRowSplit(32));  // too wide for it, whatever is asked
}

// Through the engine: the placement says which split runs, and the batch's answer is PyTorch's.
TEST(RowSplitChooser, EnginePlacementNamesTheSplitAndAnswersMatchTorch) {
  const Case c = LoadRowsCase("TorchLstmRows64");
  RecurrentSpec spec = SpecFor(c, {});
  spec.return_state = false;
  engine::Model m;
  m.name = "rows";
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, spec.input_size}});
  m.layers.push_back({"lstm", "LSTM", spec, {0}, {1}});
  m.outputs.push_back({"y", engine::DType::kFloat32, {}});
  m.output_values = {1};
  m.num_values = 2;
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  for (int threads : {1, 2}) {
    auto compiled = (*engine)->Compile(m, {.num_threads = threads, .max_batch_size = 9});
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const auto placements = (*compiled)->placements();
    ASSERT_EQ(placements.size(), 1u);
    EXPECT_NE(placements[0].reason.find("row split"), std::string::npos) << placements[0].reason;
    engine::Batch batch;
    batch.inputs.push_back(ToFloatTensor(c.at("x")));
    batch.lengths = cpu_test::Lengths(c);
    batch.initial_states["lstm"] = {ToFloatTensor(Slice(c.at("h0"), 0)),
                                    ToFloatTensor(Slice(c.at("c0"), 0))};
    std::vector<Tensor> out;
    const auto s = (*compiled)->Run(batch, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_TRUE(AllClose(out[0], c.at("y"))) << threads << " threads";
  }
}

}  // namespace
}  // namespace rnnserve
