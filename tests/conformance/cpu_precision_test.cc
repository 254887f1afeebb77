// The CPU engine's reduced-precision weights (CompileOptions::cpu_weights BF16 and INT8,
// engine/cpu/quant_gemm.h) on the conformance corpus and the real Keras files, against the
// frameworks' own outputs:
//   Keras/<Case>     tests/fixtures/keras (models/scripts/make_keras_fixtures.py), Keras's
//                    float64 predictions;
//   Onnx/<family>_<Case> tests/fixtures/onnx (node, torch, tf2onnx; ops has no recurrent
//                    layer), onnxruntime's, PyTorch's or Keras's outputs;
//   Real/<stem>      ../shared/models/keras-real (tests/fixtures/keras/real), the Keras that
//                    loads each file; skipped, saying so, where that folder is absent.
// Every case with a recurrent layer runs in FP32, BF16 and INT8. The error of each output is
// its largest |got - framework| over the output's scale, max(1, max |framework|) (hidden
// states, probabilities and logits are all of order 1; a larger output is judged relative to
// its size); it must stay within the bounds of docs/precision.md. For classifier outputs
// (softmax or sigmoid heads over two or more classes) the top class must not change where the
// framework's top class leads the runner-up by more than twice the bound. The error against our
// own FP32 and every top-class change are reported (stdout, and the summary at the end), not
// judged: FP32 is not the reference.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

namespace fs = std::filesystem;
using engine::CpuWeights;
using Json = nlohmann::json;
using testing::LoadNpy;
using testing::SourcePath;

// docs/precision.md: the largest error over the output's scale, max(1, max |framework|); about
// twice the largest seen on the corpus and the real files (BF16 1.5e-2, INT8 3.0e-2).
constexpr double kBf16Bound = 0.03;
constexpr double kInt8Bound = 0.06;

double Bound(CpuWeights w) { return w == CpuWeights::kBf16 ? kBf16Bound : kInt8Bound; }
const char* ModeName(CpuWeights w) { return w == CpuWeights::kBf16 ? "BF16" : "INT8"; }

// One case: its model, inputs and the framework's outputs.
struct Case {
  engine::Model model;
  std::vector<engine::Tensor> inputs;
  std::vector<client::NpyArray> expected;
};

engine::Tensor InputTensor(const client::NpyArray& a, bool int64) {
  return int64 ? testing::ToInt64Tensor(a) : testing::ToFloatTensor(a);
}

const Json& KerasManifest() {
  static const Json manifest = [] {
    std::ifstream in(SourcePath("tests/fixtures/keras/cases.json"));
    std::stringstream text;
    text << in.rdbuf();
    return Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  }();
  return manifest;
}

// The Keras corpus case `name`, its first file.
absl::StatusOr<Case> KerasCase(const std::string& name) {
  const Json& c = KerasManifest()["cases"][name];
  const std::string dir = "tests/fixtures/keras/" + name;
  const Json& f = c["files"][0];
  models::LoadOptions options;
  if (f.contains("architecture")) {
    options.architecture_json_path = SourcePath(dir + "/" + f["architecture"].get<std::string>());
  }
  auto model = models::LoadModelFile(SourcePath(dir + "/" + f["file"].get<std::string>()), options);
  if (!model.ok()) return model.status();
  Case out{.model = std::move(*model)};
  for (const Json& in : c["inputs"]) {
    const client::NpyArray a = LoadNpy(dir + "/" + in.get<std::string>());
    out.inputs.push_back(InputTensor(a, a.is_integer()));
  }
  for (const Json& o : c["outputs"])
    out.expected.push_back(LoadNpy(dir + "/" + o.get<std::string>()));
  return out;
}

absl::StatusOr<Case> OnnxCase(const std::string& family, const std::string& name) {
  const std::string dir = SourcePath("tests/fixtures/onnx/" + family + "/" + name);
  auto model = models::LoadModelFile(dir + "/model.onnx");
  if (!model.ok()) return model.status();
  auto data = client::ReadNpz(dir + "/data.npz");
  if (!data.ok()) return data.status();
  Case out{.model = std::move(*model)};
  for (size_t k = 0; k < out.model.inputs.size(); ++k) {
    out.inputs.push_back(InputTensor(data->at("in_" + std::to_string(k)),
                                     out.model.inputs[k].dtype == engine::DType::kInt64));
  }
  for (size_t k = 0; k < out.model.outputs.size(); ++k) {
    out.expected.push_back(data->at("out_" + std::to_string(k)));
  }
  return out;
}

const std::map<std::string, std::string>& RealFiles() {
  static const std::map<std::string, std::string> files = {
      {"aind_nlp_gru_timedistributed", "aind_nlp_gru_timedistributed.h5"},
      {"arabic_sentiment_lstm", "arabic_sentiment_lstm.h5"},
      {"elec_gru3_reset_after", "elec_gru3_reset_after.h5"},
      {"k3_sensor_bilstm", "k3_sensor_bilstm.h5"},
      {"k3_weather_lstm2", "k3_weather_lstm2.keras"}};
  return files;
}

absl::StatusOr<Case> RealCase(const std::string& stem) {
  auto model = models::LoadModelFile(testing::SharedModelsDir() + "/" + RealFiles().at(stem));
  if (!model.ok()) return model.status();
  const std::string dir = "tests/fixtures/keras/real/" + stem;
  Case out{.model = std::move(*model)};
  out.inputs.push_back(testing::ToFloatTensor(LoadNpy(dir + "/input_0.npy")));
  out.expected.push_back(LoadNpy(dir + "/expected_0.npy"));
  return out;
}

bool HasRecurrentLayer(const engine::Model& m) {
  return std::any_of(m.layers.begin(), m.layers.end(), [](const engine::Layer& l) {
    return std::holds_alternative<engine::RecurrentSpec>(l.spec);
  });
}

// Output k is a classifier's scores: made by a softmax, or a sigmoid Dense of 2+ units.
bool IsClassifier(const engine::Model& m, size_t k, const client::NpyArray& want) {
  if (want.shape.empty() || want.shape.back() < 2) return false;
  const int value = m.output_values[k];
  for (const engine::Layer& l : m.layers) {
    if (std::find(l.outputs.begin(), l.outputs.end(), value) == l.outputs.end()) continue;
    if (std::holds_alternative<engine::SoftmaxSpec>(l.spec)) return true;
    const engine::Activation* a = nullptr;
    if (const auto* d = std::get_if<engine::DenseSpec>(&l.spec)) a = &d->activation;
    if (const auto* s = std::get_if<engine::ActivationSpec>(&l.spec)) a = &s->activation;
    return a && (a->kind == engine::ActivationKind::kSoftmax ||
                 a->kind == engine::ActivationKind::kSigmoid);
  }
  return false;
}

// Errors of one mode, over every output of every case so far.
struct Errors {
  double fw = 0, fw_abs = 0;      // vs the framework: scaled, absolute
  double fp32 = 0, fp32_abs = 0;  // vs our FP32: scaled, absolute
  double fw_l2 = 0;               // vs the framework: ||got - want|| / ||want|| (GPU's metric)
  int rows = 0, top_vs_fw = 0, top_vs_fp32 = 0, top_clear = 0;
  std::string worst;  // the case with the largest scaled error vs the framework
};
std::map<CpuWeights, Errors>& Summary() {
  static std::map<CpuWeights, Errors> summary;
  return summary;
}

int64_t ArgMax(const float* v, int64_t n) { return std::max_element(v, v + n) - v; }

// Compares `got` (mode) with the framework's `want` and our `fp32`; returns the scaled error vs
// the framework and counts top-class changes into `e`.
double Compare(const std::string& name, CpuWeights mode, bool classifier, const engine::Tensor& got,
               const engine::Tensor& fp32, const client::NpyArray& want, Errors* e) {
  const int64_t n = got.num_elements();
  EXPECT_EQ(n, static_cast<int64_t>(want.values.size()));
  if (n != static_cast<int64_t>(want.values.size())) return 0;
  double scale = 1.0, fw = 0, vs32 = 0, err2 = 0, want2 = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(want.values[i]));
  for (int64_t i = 0; i < n; ++i) {
    const double d = got.f32()[i] - want.values[i];
    err2 += d * d;
    want2 += want.values[i] * want.values[i];
    fw = std::max(fw, std::abs(d));
    vs32 = std::max(vs32, static_cast<double>(std::abs(got.f32()[i] - fp32.f32()[i])));
  }
  e->fw_abs = std::max(e->fw_abs, fw);
  e->fp32_abs = std::max(e->fp32_abs, vs32);
  e->fp32 = std::max(e->fp32, vs32 / scale);
  if (want2 > 0) e->fw_l2 = std::max(e->fw_l2, std::sqrt(err2 / want2));
  if (fw / scale > e->fw) {
    e->fw = fw / scale;
    e->worst = name;
  }
  int changed = 0;
  if (classifier) {
    const int64_t classes = want.shape.back();
    for (int64_t r = 0; r < n / classes; ++r) {
      std::vector<float> ref(want.values.begin() + r * classes,
                             want.values.begin() + (r + 1) * classes);
      const int64_t top = ArgMax(ref.data(), classes);
      const float lead = ref[top];
      ref[top] = -INFINITY;
      const float margin = lead - *std::max_element(ref.begin(), ref.end());
      const int64_t ours = ArgMax(got.f32() + r * classes, classes);
      ++e->rows;
      if (ours != ArgMax(fp32.f32() + r * classes, classes)) ++e->top_vs_fp32;
      if (ours == top) continue;
      ++changed;
      ++e->top_vs_fw;
      if (margin > 2 * Bound(mode) * scale) ++e->top_clear;
      EXPECT_LE(margin, 2 * Bound(mode) * scale)
          << ModeName(mode) << " changed the top class of row " << r << " (framework's lead "
          << margin << ")";
    }
  }
  std::printf("%-5s %-60s err %.2e (abs %.2e) vs FP32 %.2e%s\n", ModeName(mode), name.c_str(),
              fw / scale, fw, vs32 / scale,
              classifier ? (" top-class changes " + std::to_string(changed)).c_str() : "");
  return fw / scale;
}

void RunModes(const std::string& name, absl::StatusOr<Case> c) {
  ASSERT_TRUE(c.ok()) << c.status();
  if (!HasRecurrentLayer(c->model)) GTEST_SKIP() << "no recurrent layer: weights stay FP32";
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok());
  std::map<CpuWeights, std::vector<engine::Tensor>> out;
  for (CpuWeights mode : {CpuWeights::kFp32, CpuWeights::kBf16, CpuWeights::kInt8}) {
    auto compiled = (*engine)->Compile(c->model, {.cpu_weights = mode});
    if (compiled.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "no CPU kernel yet: " << compiled.status().message();
    }
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    engine::Batch batch;
    batch.inputs = c->inputs;
    const absl::Status run = (*compiled)->Run(batch, &out[mode]);
    ASSERT_TRUE(run.ok()) << run;
    ASSERT_EQ(out[mode].size(), c->expected.size());
  }
  for (CpuWeights mode : {CpuWeights::kBf16, CpuWeights::kInt8}) {
    for (size_t k = 0; k < c->expected.size(); ++k) {
      const double err = Compare(name + " out " + std::to_string(k), mode,
                                 IsClassifier(c->model, k, c->expected[k]), out[mode][k],
                                 out[CpuWeights::kFp32][k], c->expected[k], &Summary()[mode]);
      EXPECT_LE(err, Bound(mode)) << ModeName(mode) << " output " << k
                                  << ": error over scale past docs/precision.md's bound";
    }
  }
}

std::vector<std::string> KerasNames() {
  std::vector<std::string> names;
  const Json& m = KerasManifest();
  if (m.is_object() && m.contains("cases")) {
    for (const auto& [name, _] : m["cases"].items()) names.push_back(name);
  }
  return names;
}

std::vector<std::string> OnnxNames(const std::string& family) {
  std::vector<std::string> names;
  const fs::path dir = SourcePath("tests/fixtures/onnx/" + family);
  if (!fs::is_directory(dir)) return names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> RealNames() {
  std::vector<std::string> names;
  for (const auto& [stem, _] : RealFiles()) names.push_back(stem);
  return names;
}

class KerasCorpus : public ::testing::TestWithParam<std::string> {};
class OnnxCorpus : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};
class RealKeras : public ::testing::TestWithParam<std::string> {};

TEST_P(KerasCorpus, ReducedPrecisionWithinBoundOfKeras) {
  RunModes("keras/" + GetParam(), KerasCase(GetParam()));
}

TEST_P(OnnxCorpus, ReducedPrecisionWithinBoundOfReference) {
  const auto& [family, name] = GetParam();
  RunModes("onnx/" + family + "/" + name, OnnxCase(family, name));
}

TEST_P(RealKeras, ReducedPrecisionWithinBoundOfKeras) {
  if (testing::SharedModelsDir().empty()) {
    GTEST_SKIP() << "../shared/models/keras-real is absent; real Keras files not tested";
  }
  RunModes("real/" + GetParam(), RealCase(GetParam()));
}

std::vector<std::pair<std::string, std::string>> OnnxParams() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* family : {"node", "torch", "tf2onnx"}) {
    for (const std::string& n : OnnxNames(family)) out.emplace_back(family, n);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(CpuPrecision, KerasCorpus, ::testing::ValuesIn(KerasNames()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(CpuPrecision, OnnxCorpus, ::testing::ValuesIn(OnnxParams()),
                         [](const auto& info) {
                           return info.param.first + "_" + info.param.second;
                         });
INSTANTIATE_TEST_SUITE_P(CpuPrecision, RealKeras, ::testing::ValuesIn(RealNames()),
                         [](const auto& info) { return info.param; });

// Prints the summary docs/precision.md quotes, after the last case.
class SummaryPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [mode, e] : Summary()) {
      std::printf(
          "SUMMARY %s: vs framework max scaled %.2e (worst %s), max abs %.2e, max relative L2 "
          "%.2e; vs FP32 max scaled %.2e, max abs %.2e; classifier rows %d, top class changed "
          "vs framework %d (%d with a lead over 2x the bound), vs FP32 %d\n",
          ModeName(mode), e.fw, e.worst.c_str(), e.fw_abs, e.fw_l2, e.fp32, e.fp32_abs, e.rows,
          e.top_vs_fw, e.top_clear, e.top_vs_fp32);
    }
  }
};
const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new SummaryPrinter);

}  // namespace
}  // namespace rnnserve
