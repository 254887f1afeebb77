// The resident step loop (engine/cuda/resident_loop.h): sequences of random lengths join free
// slots at random steps of the running loop and leave as they finish; each sequence's outputs
// and final states must equal the GPU engine's whole-batch path on the same model, and, for the
// Keras corpus (tests/fixtures/keras, made by models/scripts/make_keras_fixtures.py), Keras's.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cuda/resident_loop.h"
#include "engine/cuda/resident_model.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;
using engine::cuda::ResidentLoop;

struct Sequence {
  std::vector<float> x;  // [length, I]
  int length = 0;
  std::vector<float> y, h, c;  // from the loop: [length, H], [H], [H] (LSTM)
};

// Runs every sequence through `loop`: in a random order, each joins a free slot after a random
// 0..3 further steps of the loop (at once when no slot is active), and leaves when done.
void RunThrough(ResidentLoop& loop, std::vector<Sequence>& seqs, std::mt19937& rng) {
  std::vector<int> order(seqs.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::uniform_int_distribution<int> delay(0, 3);
  std::vector<int> in_slot(loop.capacity(), -1);
  const int H = loop.hidden_size();
  size_t next = 0;
  int active = 0;
  uint64_t join_at = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (next < order.size() || active > 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), give_up)
        << "the loop stopped advancing: " << active << " active, " << order.size() - next
        << " waiting, " << loop.steps() << " steps run";
    for (int slot = 0; slot < loop.capacity(); ++slot) {
      if (in_slot[slot] < 0 || !loop.Done(slot)) continue;
      Sequence& s = seqs[in_slot[slot]];
      if (loop.outputs(slot) != nullptr) {
        s.y.assign(loop.outputs(slot), loop.outputs(slot) + static_cast<size_t>(s.length) * H);
      }
      s.h.assign(loop.final_h(slot), loop.final_h(slot) + H);
      if (loop.final_c(slot) != nullptr) s.c.assign(loop.final_c(slot), loop.final_c(slot) + H);
      in_slot[slot] = -1;
      --active;
    }
    if (next == order.size() || (active > 0 && loop.steps() < join_at)) continue;
    const auto free = std::find(in_slot.begin(), in_slot.end(), -1);
    if (free == in_slot.end()) continue;
    const int slot = static_cast<int>(free - in_slot.begin());
    const Sequence& s = seqs[order[next]];
    ASSERT_TRUE(loop.Join(slot, s.x.data(), s.length).ok());
    in_slot[slot] = order[next++];
    ++active;
    join_at = loop.steps() + delay(rng);
  }
}

// |got - want| <= atol + rtol * |want| element by element, over n elements.
::testing::AssertionResult Close(const float* got, const float* want, size_t n,
                                 const Tolerance& tol, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol.atol + tol.rtol * std::fabs(want[i]))) {
      return ::testing::AssertionFailure()
             << what << " element " << i << ": " << got[i] << " vs " << want[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The rows of `t` ([B, T, H] or [B, H]) for sequence b: its first `steps` steps (or its row).
std::vector<float> Rows(const engine::Tensor& t, int64_t b, int steps) {
  const int64_t H = t.dim(t.rank() - 1);
  const int64_t per = t.num_elements() / t.dim(0);
  const float* p = t.f32() + b * per;
  return std::vector<float>(p, p + (t.rank() == 3 ? steps * H : H));
}

// Compares sequence b's loop results with `outputs` (one per model output; which of the layer's
// outputs each is: plan.outputs), where `last` is true for a layer output that is the last h.
void ExpectSequenceMatches(const Sequence& s, int64_t b, const engine::cuda::ResidentPlan& plan,
                           const std::vector<engine::Tensor>& outputs, const Tolerance& tol,
                           const std::string& what) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::vector<float> want = Rows(outputs[k], b, s.length);
    const std::vector<float>* got = &s.h;
    if (plan.outputs[k] == 0 && outputs[k].rank() == 3) got = &s.y;
    if (plan.outputs[k] == 2) got = &s.c;
    ASSERT_EQ(got->size(), want.size()) << what << " output " << k;
    EXPECT_TRUE(Close(got->data(), want.data(), want.size(), tol,
                      absl::StrCat(what, " sequence ", b, " output ", k)));
  }
}

class GpuResidentLoop : public ::testing::Test {
 protected:
  void SetUp() override { RNNSERVE_SKIP_WITHOUT_GPU(); }
};

struct RandomCase {
  engine::CellType cell;
  int input, hidden, capacity, max_len, sequences;
  int units = 0;                // ResidentLoopOptions::units_per_block
  bool register_kernel = true;  // ResidentLoopOptions::register_kernel
  bool want_register = false;   // whether the loop must run it on the register kernel
};

TEST_F(GpuResidentLoop, RandomJoinsAndLeavesMatchTheWholeBatchPath) {
  using engine::CellType;
  const RandomCase cases[] = {
      // The register kernel: H padded to the lanes' columns, 1, 2 or 4 units a block (the
      // last block's fewer), more active slots than a block's warps take in one pass.
      {CellType::kLstm, 8, 16, 4, 30, 24, 0, true, true},
      {CellType::kGru, 8, 16, 4, 30, 24, 0, true, true},
      {CellType::kLstm, 24, 64, 8, 60, 40, 0, true, true},
      {CellType::kGru, 24, 64, 8, 60, 40, 0, true, true},
      {CellType::kLstm, 40, 256, 40, 50, 90, 2, true, true},
      {CellType::kGru, 40, 256, 40, 50, 90, 2, true, true},
      {CellType::kLstm, 33, 98, 12, 40, 30, 4, true, true},
      {CellType::kGru, 33, 98, 12, 40, 30, 4, true, true},
      {CellType::kGru, 130, 200, 70, 20, 100, 2, true, true},
      // The shared-memory kernel: a layer the register kernel is not compiled for, several
      // units a block (the last block's fewer), or asked for.
      {CellType::kLstm, 40, 300, 16, 50, 48},
      {CellType::kGru, 40, 300, 16, 50, 48},
      {CellType::kLstm, 24, 64, 8, 60, 40, 3},
      {CellType::kGru, 40, 300, 16, 50, 48, 7},
      {CellType::kLstm, 40, 256, 40, 50, 90, 2, false},
      {CellType::kGru, 24, 64, 8, 60, 40, 0, false},
  };
  uint32_t seed = 7;
  for (const RandomCase& rc : cases) {
    const std::string what = absl::StrCat(
        engine::CellTypeName(rc.cell), " I=", rc.input, " H=", rc.hidden, " slots=", rc.capacity,
        " units=", rc.units, rc.register_kernel ? "" : " shared-memory kernel");
    SCOPED_TRACE(what);
    std::mt19937 rng(++seed);
    const engine::Model model = RandomRnnModel({.cell = rc.cell,
                                                .input = rc.input,
                                                .hidden = rc.hidden,
                                                .return_sequences = true,
                                                .return_state = true,
                                                .seed = seed});
    const engine::cuda::ResidentPlan plan = engine::cuda::PlanResident(model);
    ASSERT_NE(plan.layer, nullptr) << plan.why;
    std::uniform_int_distribution<int> len(1, rc.max_len);
    std::vector<Sequence> seqs(rc.sequences);
    for (Sequence& s : seqs) {
      s.length = len(rng);
      s.x = RandomVector(&rng, static_cast<size_t>(s.length) * rc.input, 1.0f);
    }
    // The GPU engine's path: one batch, padded to the longest, with per-row lengths.
    const int T = std::max_element(seqs.begin(), seqs.end(), [](auto& a, auto& b) {
                    return a.length < b.length;
                  })->length;
    auto compiled = CompileOn(engine::EngineKind::kCuda, model);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    engine::Batch batch;
    batch.inputs.push_back(engine::Tensor::Float({rc.sequences, T, rc.input}));
    for (int b = 0; b < rc.sequences; ++b) {
      std::copy(seqs[b].x.begin(), seqs[b].x.end(),
                batch.inputs[0].f32() + static_cast<size_t>(b) * T * rc.input);
      batch.lengths.push_back(seqs[b].length);
    }
    std::vector<engine::Tensor> want;
    ASSERT_TRUE((*compiled)->Run(batch, &want).ok());
    compiled->reset();  // nothing else on the device while the loop runs

    auto loop = ResidentLoop::Create(std::get<engine::RecurrentSpec>(plan.layer->spec),
                                     {.capacity = rc.capacity,
                                      .max_steps = rc.max_len,
                                      .units_per_block = rc.units,
                                      .register_kernel = rc.register_kernel});
    ASSERT_TRUE(loop.ok()) << loop.status();
    EXPECT_EQ((*loop)->register_kernel(), rc.want_register);
    RunThrough(**loop, seqs, rng);
    if (HasFatalFailure()) return;
    for (int b = 0; b < rc.sequences; ++b) {
      ExpectSequenceMatches(seqs[b], b, plan, want, kFp32CrossEngine, what);
    }
  }
}

TEST_F(GpuResidentLoop, UnitsPerBlockOutsideTheHiddenSizeIsInvalid) {
  const engine::Model model =
      RandomRnnModel({.cell = engine::CellType::kLstm, .input = 8, .hidden = 16, .seed = 3});
  const engine::cuda::ResidentPlan plan = engine::cuda::PlanResident(model);
  ASSERT_NE(plan.layer, nullptr) << plan.why;
  for (int units : {-1, 17}) {
    auto loop = ResidentLoop::Create(std::get<engine::RecurrentSpec>(plan.layer->spec),
                                     {.capacity = 4, .max_steps = 8, .units_per_block = units});
    ASSERT_FALSE(loop.ok()) << units;
    EXPECT_EQ(loop.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(loop.status().message().find("units_per_block"), std::string::npos);
  }
}

// Every Keras case the loop runs (one LSTM or GRU layer, full-length rows): rows in a random
// order through the loop against Keras's outputs and the GPU engine's.
TEST_F(GpuResidentLoop, KerasCorpusMatchesKerasAndTheEngine) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(SourcePath("tests/fixtures/keras"))) {
    if (e.is_directory()) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  std::mt19937 rng(40);
  int ran = 0;
  for (const fs::path& dir : dirs) {
    const std::string name = dir.filename().string();
    fs::path file;
    for (const char* f : {"model.h5", "model.keras"}) {
      if (fs::exists(dir / f)) file = dir / f;
    }
    if (file.empty() || !fs::exists(dir / "input_0.npy") || fs::exists(dir / "lengths.npy") ||
        fs::exists(dir / "input_1.npy")) {
      continue;
    }
    auto model = models::LoadModelFile(file.string());
    if (!model.ok()) continue;
    const engine::cuda::ResidentPlan plan = engine::cuda::PlanResident(*model);
    if (plan.layer == nullptr) {
      std::printf("[ keras    ] %s: chunked path (%s)\n", name.c_str(), plan.why.c_str());
      continue;
    }
    SCOPED_TRACE(name);
    const std::string rel = "tests/fixtures/keras/" + name;
    const engine::Tensor x = ToFloatTensor(LoadNpy(rel + "/input_0.npy"));
    const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2);
    std::vector<engine::Tensor> keras;
    for (size_t k = 0; k < plan.outputs.size(); ++k) {
      keras.push_back(ToFloatTensor(LoadNpy(absl::StrCat(rel, "/expected_", k, ".npy"))));
    }
    auto compiled = CompileOn(engine::EngineKind::kCuda, *model);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    engine::Batch batch;
    batch.inputs.push_back(x);
    std::vector<engine::Tensor> engine_out;
    ASSERT_TRUE((*compiled)->Run(batch, &engine_out).ok());
    compiled->reset();

    std::vector<Sequence> seqs(B);
    for (int64_t b = 0; b < B; ++b) {
      seqs[b].length = static_cast<int>(T);
      seqs[b].x.assign(x.f32() + b * T * I, x.f32() + (b + 1) * T * I);
    }
    auto loop = ResidentLoop::Create(std::get<engine::RecurrentSpec>(plan.layer->spec),
                                     {.capacity = 2, .max_steps = static_cast<int>(T)});
    ASSERT_TRUE(loop.ok()) << loop.status();
    RunThrough(**loop, seqs, rng);
    if (HasFatalFailure()) return;
    for (int64_t b = 0; b < B; ++b) {
      ExpectSequenceMatches(seqs[b], b, plan, keras, kFp32CrossEngine, name + " (Keras)");
      ExpectSequenceMatches(seqs[b], b, plan, engine_out, kFp32CrossEngine, name + " (engine)");
    }
    std::printf("[ keras    ] %s: %lld rows through the resident loop\n", name.c_str(),
                static_cast<long long>(B));
    ++ran;
  }
  EXPECT_GE(ran, 3) << "the Keras corpus holds three single-layer LSTM and GRU cases";
}

// What the loop does not run keeps the chunked path, and PlanResident says why (no GPU needed).
TEST(ResidentPlan, SaysWhyAModelKeepsTheChunkedPath) {
  EXPECT_NE(engine::cuda::PlanResident(RandomRnnModel({})).layer, nullptr);
  const struct {
    RandomRnnOptions options;
    const char* why;
  } cases[] = {
      {{.directions = 2}, "bidirectional"},
      {{.peepholes = true}, "peepholes"},
      {{.cell = engine::CellType::kGru, .reset_after = false}, "reset_after=False"},
      {{.lone_reverse = true}, "reversed"},
      {{.initial_states = true}, "more than one input"},
      {{.masking_layer = true}, "Masking"},
  };
  for (const auto& c : cases) {
    const engine::cuda::ResidentPlan plan = engine::cuda::PlanResident(RandomRnnModel(c.options));
    EXPECT_EQ(plan.layer, nullptr) << c.why;
    EXPECT_NE(plan.why.find(c.why), std::string::npos) << plan.why;
  }
}

}  // namespace
}  // namespace rnnserve::testing
