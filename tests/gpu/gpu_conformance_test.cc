// Every conformance case the CPU engine passes also runs on the GPU engine, against the same
// expected outputs (made by the real frameworks: Keras, PyTorch, onnxruntime), in exact FP32;
// and within stated bounds in TF32, FP16 and BF16.
//
// Cases are found at run time under tests/fixtures/{example,keras,onnx,torch}/<Case>/: a model
// file (model.h5, model.keras, model.onnx, or weights.h5 + architecture.json), inputs
// input_<i>.npy (integer arrays become token ids), optional lengths.npy, and expected_<i>.npy.
// tests/fixtures/keras/real/<stem>/ pairs with ../shared/models/keras-real/<stem>.{h5,keras}.
// tests/fixtures/onnx/{node,ops,torch,tf2onnx}/<Case>/ hold model.onnx and data.npz (in_<k>,
// out_<k>: onnxruntime's, PyTorch's or Keras's outputs), as onnx_fixtures_test.cc reads them.
//
// Placement: in exact FP32 every recurrent layer runs on the GPU, on cuDNN or, for a cell
// cuDNN cannot run, on the fused CUDA recurrent kernel, and says which and why.
// A case the CPU engine cannot load or does not match is skipped with that reason: the GPU
// engine is held to what the reference engine already does.

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/fused_rnn_kernel.h"
#include "engine/cudnn_support.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

struct FixtureCase {
  std::string name;          // gtest-safe: <Corpus>_<Case>
  std::string dir;           // absolute
  std::string model;         // absolute model file
  std::string architecture;  // weights-only Keras files
  std::string npz;           // ONNX families: inputs and expected outputs in one archive
};

void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.name; }

// Whether FusedRnn offers the layer its batch-tiled kernel on this device.
bool FusedRnnOffersBatched(const engine::RecurrentSpec& spec) {
  auto f = engine::cuda::FusedRnn::Create(spec, nullptr);
  return f.ok() && (*f)->has_batched();
}

std::vector<std::string> Numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int i = 0;; ++i) {
    const fs::path p = dir / absl::StrCat(prefix, i, ".npy");
    if (!fs::exists(p)) break;
    out.push_back(p.string());
  }
  return out;
}

std::string Sanitize(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

std::vector<FixtureCase> FindCases() {
  std::vector<FixtureCase> cases;
  const fs::path root = SourcePath("tests/fixtures");
  auto add_dir = [&](const std::string& corpus, const fs::path& dir, const fs::path& model,
                     const fs::path& arch) {
    if (Numbered(dir, "input_").empty() || Numbered(dir, "expected_").empty()) return;
    cases.push_back({Sanitize(absl::StrCat(corpus, "_", dir.filename().string())), dir.string(),
                     model.string(), arch.empty() ? "" : arch.string(), ""});
  };
  for (const char* family : {"node", "ops", "torch", "tf2onnx"}) {
    const fs::path base = root / "onnx" / family;
    if (!fs::is_directory(base)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(base)) {
      if (fs::exists(e.path() / "model.onnx") && fs::exists(e.path() / "data.npz")) {
        dirs.push_back(e.path());
      }
    }
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      cases.push_back({Sanitize(absl::StrCat("onnx_", family, "_", dir.filename().string())),
                       dir.string(), (dir / "model.onnx").string(), "",
                       (dir / "data.npz").string()});
    }
  }
  for (const char* corpus : {"keras", "onnx", "torch"}) {
    const fs::path base = root / corpus;
    if (!fs::is_directory(base)) continue;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(base)) {
      if (e.is_directory()) dirs.push_back(e.path());
    }
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& dir : dirs) {
      if (dir.filename() == "real") {
        const std::string shared = SharedModelsDir();
        for (const auto& e : fs::directory_iterator(dir)) {
          for (const char* ext : {".h5", ".keras"}) {
            const fs::path model = fs::path(shared) / (e.path().filename().string() + ext);
            if (!shared.empty() && fs::exists(model)) add_dir("real", e.path(), model, {});
          }
        }
        continue;
      }
      for (const char* file : {"model.h5", "model.keras", "model.onnx"}) {
        if (fs::exists(dir / file)) {
          add_dir(corpus, dir, dir / file, {});
          break;
        }
      }
      if (fs::exists(dir / "weights.h5") && fs::exists(dir / "architecture.json")) {
        add_dir(corpus, dir, dir / "weights.h5", dir / "architecture.json");
      }
    }
  }
  if (cases.empty()) cases.push_back({"NoFixtures", "", "", ""});
  return cases;
}

class GpuConformanceTest : public ::testing::TestWithParam<FixtureCase> {
 protected:
  // Loads the case and checks that the CPU engine matches its expected outputs; sets skip_.
  void SetUp() override {
    if (const std::string why = NoGpuReason(); !why.empty()) {
      GTEST_SKIP() << "needs a GPU and the CUDA engine: " << why;
    }
    const FixtureCase& c = GetParam();
    if (c.dir.empty()) GTEST_SKIP() << "no conformance fixtures under tests/fixtures yet";
    models::LoadOptions load;
    load.architecture_json_path = c.architecture;
    auto model = models::LoadModelFile(c.model, load);
    if (!model.ok()) GTEST_SKIP() << "the importer does not load this case yet: " << model.status();
    model_ = *model;
    if (!c.npz.empty()) {
      auto data = client::ReadNpz(c.npz);
      ASSERT_TRUE(data.ok()) << data.status();
      for (size_t k = 0; k < model_.inputs.size(); ++k) {
        const auto it = data->find(absl::StrCat("in_", k));
        ASSERT_NE(it, data->end()) << "in_" << k;
        batch_.inputs.push_back(model_.inputs[k].dtype == engine::DType::kInt64
                                    ? ToInt64Tensor(it->second)
                                    : ToFloatTensor(it->second));
      }
      for (size_t k = 0; k < model_.outputs.size(); ++k) {
        const auto it = data->find(absl::StrCat("out_", k));
        ASSERT_NE(it, data->end()) << "out_" << k;
        expected_.push_back(it->second);
      }
    }
    for (const std::string& p : Numbered(c.dir, "input_")) {
      auto a = client::ReadNpy(p);
      ASSERT_TRUE(a.ok()) << a.status();
      batch_.inputs.push_back(a->is_integer() ? ToInt64Tensor(*a) : ToFloatTensor(*a));
    }
    if (fs::exists(fs::path(c.dir) / "lengths.npy")) {
      auto a = client::ReadNpy((fs::path(c.dir) / "lengths.npy").string());
      ASSERT_TRUE(a.ok()) << a.status();
      batch_.lengths.assign(a->values.begin(), a->values.end());
    }
    for (const std::string& p : Numbered(c.dir, "expected_")) {
      auto a = client::ReadNpy(p);
      ASSERT_TRUE(a.ok()) << a.status();
      expected_.push_back(*a);
    }
    auto cpu = CompileOn(engine::EngineKind::kCpu, model_);
    if (!cpu.ok())
      GTEST_SKIP() << "the CPU engine does not compile this case yet: " << cpu.status();
    std::vector<engine::Tensor> out;
    if (auto s = (*cpu)->Run(batch_, &out); !s.ok()) {
      GTEST_SKIP() << "the CPU engine does not run this case yet: " << s;
    }
    if (out.size() != expected_.size()) {
      GTEST_SKIP() << "the CPU engine gives " << out.size() << " outputs, expected "
                   << expected_.size();
    }
    // The tolerance the CPU engine meets: the 1e-5, or 1e-4 for long or deep cases.
    for (const Tolerance& tol : {kFp32Exact, kFp32CrossEngine}) {
      bool all = true;
      for (size_t i = 0; i < out.size(); ++i) all = all && AllClose(out[i], expected_[i], tol);
      if (all) {
        tol_ = tol;
        return;
      }
    }
    GTEST_SKIP() << "the CPU engine does not match this case's expected outputs yet";
  }

  engine::Model model_;
  engine::Batch batch_;
  std::vector<client::NpyArray> expected_;
  Tolerance tol_ = kFp32Exact;
};

TEST_P(GpuConformanceTest, MatchesFrameworkInExactFp32) {
  auto gpu = CompileOn(engine::EngineKind::kCuda, model_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::vector<engine::Tensor> out;
  // Three runs: eager, captured whole into a graph, replayed (where the model can be).
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE(absl::StrCat("run ", run));
    const absl::Status s = (*gpu)->Run(batch_, &out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(out.size(), expected_.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_TRUE(AllClose(out[i], expected_[i], tol_)) << "output " << i;
    }
  }
  const engine::RunCounters counters = (*gpu)->counters();
  const int64_t replays = counters.graph_replays;
  const std::string& graph_note = counters.graph_note;
  std::cout << "[ graph ] whole-batch graph replays: " << replays << " " << graph_note << "\n";
  const auto placements = (*gpu)->placements();
  // Every layer of the model is placed; the engine may add its own (the request-lengths ops of
  // engine/lengths_rewrite.h), which run on the device too.
  std::map<std::string, const engine::Layer*> by_name;
  for (const engine::Layer& l : model_.layers) by_name[l.name] = &l;
  size_t model_layers_placed = 0;
  // Only Masking (its lengths go to cuDNN's host-side descriptors) and tensor ops over INT64
  // shape tensors may run on the host; every other layer runs on the device.
  bool all_on_device = true;
  for (size_t l = 0; l < placements.size(); ++l) {
    const auto& p = placements[l];
    std::cout << "[ place ] " << p.layer << ": " << p.engine << " (" << p.reason << ")\n";
    const auto found = by_name.find(p.layer);
    const engine::Layer* layer = found == by_name.end() ? nullptr : found->second;
    model_layers_placed += layer != nullptr;
    const bool host_allowed =
        (layer != nullptr && std::holds_alternative<engine::MaskingSpec>(layer->spec)) ||
        absl::StartsWith(p.reason, "host: shape arithmetic on INT64 tensors");
    if (!host_allowed) {
      EXPECT_EQ(p.engine, "cuda") << p.layer << ": " << p.reason;
    }
    all_on_device = all_on_device && p.engine == "cuda";
    if (layer == nullptr) continue;
    const auto* rnn = std::get_if<engine::RecurrentSpec>(&layer->spec);
    if (rnn == nullptr) continue;
    if (!engine::CudnnSupports(*rnn).ok()) {
      EXPECT_TRUE(absl::StrContains(p.reason, "fused CUDA recurrent kernel"))
          << p.layer << ": " << p.reason;
      // GRU reset_after=False at the register kernels' widths (multiples of 128 up to 1024,
      // and up to 64 on the one-block kernel): batches of up to 8 there.
      // Both directions of one (sigmoid/tanh, no clip), where FusedRnn offers it (widths whose
      // chunks split into columns of 4): the batch-tiled persistent kernel.
      const auto& dirs = rnn->directions;
      const bool plain_gru_before =
          rnn->cell == engine::CellType::kGru && !rnn->reset_after && rnn->clip == 0.0f &&
          std::all_of(dirs.begin(), dirs.end(), [](const engine::RecurrentDirection& d) {
            return d.f.kind == engine::ActivationKind::kSigmoid &&
                   d.g.kind == engine::ActivationKind::kTanh;
          });
      if (plain_gru_before && dirs.size() == 1 && !dirs[0].reverse &&
          (engine::cuda::FusedRnnRegCompiled(rnn->hidden_size) ||
           rnn->hidden_size <= engine::cuda::kFusedBlockRegMaxHidden)) {
        EXPECT_TRUE(absl::StrContains(p.reason, "persistent register kernel"))
            << p.layer << ": " << p.reason;
      }
      if (plain_gru_before && dirs.size() == 2 && !dirs[0].reverse && dirs[1].reverse &&
          FusedRnnOffersBatched(*rnn)) {
        EXPECT_TRUE(absl::StrContains(p.reason, "batch-tiled persistent kernel"))
            << p.layer << ": " << p.reason;
      }
    }
  }
  EXPECT_EQ(model_layers_placed, model_.layers.size());
  // No value goes back to the host between layers of a model placed wholly on the device
  // (the model's inputs go up once and its outputs come down once).
  const int64_t copies = (*gpu)->counters().host_copies_in_last_run;
  std::cout << "[ copies ] device-to-host copies between layers: " << copies << "\n";
  if (all_on_device) {
    EXPECT_EQ(copies, 0);
  }
  // A model wholly on the device replays its graph at the third run, unless its launches
  // depend on values the host reads (Embedding ids, INT64 inputs).
  const bool host_reads =
      std::any_of(
          model_.layers.begin(), model_.layers.end(),
          [](const auto& l) { return std::holds_alternative<engine::EmbeddingSpec>(l.spec); }) ||
      std::any_of(batch_.inputs.begin(), batch_.inputs.end(),
                  [](const engine::Tensor& t) { return t.dtype() != engine::DType::kFloat32; });
  // (ONNX graphs' own ops may upload from the host per batch, e.g. Gather's indices: those run
  // eagerly, and the note says why.)
  if (all_on_device && !host_reads && absl::StartsWith(GetParam().name, "keras_")) {
    EXPECT_GE(replays, 1) << graph_note;
  }
}

TEST_P(GpuConformanceTest, GraphReplaysAnswerOtherValuesAndLengthsAsTheCpuEngine) {
  // Four batches of one shape and one graph key (other values, other lengths with the same
  // longest): the GPU engine runs the first eagerly, captures the second and replays the
  // others, or runs all four eagerly where it cannot replay; each answer must be the CPU
  // engine's for the same batch (a replay must not keep the values or lengths it was captured
  // with).
  if (batch_.inputs.empty() || batch_.inputs[0].rank() < 2) GTEST_SKIP() << "no time axis";
  const int64_t B = batch_.inputs[0].dim(0), T = batch_.inputs[0].dim(1);
  if (B < 2 || T < 2) GTEST_SKIP() << "needs two rows of two steps";
  auto cpu = CompileOn(engine::EngineKind::kCpu, model_);
  auto gpu = CompileOn(engine::EngineKind::kCuda, model_);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  const float scales[] = {0.5f, 0.75f, 0.25f, 1.5f};  // positive: log and sqrt cases stay real
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(absl::StrCat("batch ", k));
    engine::Batch batch;
    for (const engine::Tensor& t : batch_.inputs) {
      engine::Tensor c = t;
      if (c.dtype() == engine::DType::kFloat32) {
        for (int64_t i = 0; i < c.num_elements(); ++i) c.f32()[i] *= scales[k];
      }
      batch.inputs.push_back(std::move(c));
    }
    batch.lengths.assign(B, static_cast<int32_t>(T));
    batch.lengths[k % 2] = static_cast<int32_t>(T - 1);
    std::vector<engine::Tensor> want, got;
    if (const absl::Status s = (*cpu)->Run(batch, &want); !s.ok()) {
      GTEST_SKIP() << "the CPU engine does not take these lengths: " << s;
    }
    const absl::Status s = (*gpu)->Run(batch, &got);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].dtype(), want[i].dtype()) << "output " << i;
      if (got[i].dtype() != engine::DType::kFloat32) {
        EXPECT_TRUE(std::equal(got[i].i64(), got[i].i64() + got[i].num_elements(), want[i].i64(),
                               want[i].i64() + want[i].num_elements()))
            << "output " << i;
        continue;
      }
      client::NpyArray w{.descr = "<f4", .shape = want[i].shape()};
      w.values.assign(want[i].f32(), want[i].f32() + want[i].num_elements());
      EXPECT_TRUE(AllClose(got[i], w, kFp32CrossEngine)) << "output " << i;
    }
  }
  const engine::RunCounters counters = (*gpu)->counters();
  std::cout << "[ graph ] replays of four batches of one key: " << counters.graph_replays << " "
            << counters.graph_note << "\n";
}

TEST_P(GpuConformanceTest, ReducedPrecisionWithinStatedBounds) {
  // Relative L2 error over each output. These models are small (H <= 64, T <= 20); the bounds
  // are those of one rounding of inputs and weights carried through the recurrence.
  for (const ReducedPrecisionBound& m : kReducedPrecisionBounds) {
    auto gpu = CompileOn(engine::EngineKind::kCuda, model_, m.mode);
    if (gpu.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << m.name << ": " << gpu.status();
    }
    ASSERT_TRUE(gpu.ok()) << m.name << ": " << gpu.status();
    std::vector<engine::Tensor> out;
    const absl::Status s = (*gpu)->Run(batch_, &out);
    ASSERT_TRUE(s.ok()) << m.name << ": " << s;
    for (size_t i = 0; i < out.size(); ++i) {
      const double err = RelativeError(out[i], expected_[i].values);
      EXPECT_LE(err, m.relative_l2) << m.name << " output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GpuConformanceTest, ::testing::ValuesIn(FindCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace rnnserve::testing
