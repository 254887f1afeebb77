// The Keras conformance corpus (models/scripts/make_keras_fixtures.py) served through
// step-level (cellular) batching: every case whose model can run that way, its rows sent as
// separate requests in a random order and at random moments, so they join and leave the
// running batch at different chunks, matches the real Keras's predictions. Chunk sizes vary
// by case. Instantiated for the CPU engine (label conformance) and the GPU engine (label gpu).
// Cases the scheduler refuses (bidirectional, pooling, ...) skip, naming why.

#include <algorithm>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "server/batch_util.h"
#include "server/servable.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/support/fixtures.h"
#include "tests/support/keras_corpus.h"

namespace rnnserve::testing {
namespace {

using Json = nlohmann::json;
using engine::EngineKind;

constexpr const char* kCorpus = testing::kKerasCorpus;

const Json& Manifest() { return testing::KerasCorpusManifest(); }

absl::StatusOr<engine::Model> LoadCase(const std::string& name) {
  const Json& c = Manifest()["cases"][name];
  const std::string dir = std::string(kCorpus) + "/" + name;
  const Json& f = c["files"][0];
  models::LoadOptions options;
  if (f.contains("architecture")) {
    options.architecture_json_path = SourcePath(dir + "/" + f["architecture"].get<std::string>());
  }
  return models::LoadModelFile(SourcePath(dir + "/" + f["file"].get<std::string>()), options);
}

v1::ModelConfig CellularConfig(const std::string& name, EngineKind kind, int chunk_steps) {
  v1::ModelConfig config;
  const std::string text = absl::StrCat(
      "name: '", name, "' max_batch_size: 16 instance_group { kind: ",
      kind == EngineKind::kCuda ? "KIND_GPU" : "KIND_CPU",
      " count: 1 } cellular_batching { max_active_sequences: 16 chunk_steps: ", chunk_steps, " }");
  google::protobuf::TextFormat::ParseFromString(text, &config);
  return config;
}

using Case = std::tuple<EngineKind, std::string>;

class CellularConformance : public ::testing::TestWithParam<Case> {};

TEST_P(CellularConformance, RowsArrivingApartMatchKeras) {
  const auto& [kind, name] = GetParam();
  if (kind == EngineKind::kCuda) RNNSERVE_SKIP_WITHOUT_GPU();
  const Json& c = Manifest()["cases"][name];
  const std::string dir = std::string(kCorpus) + "/" + name;
  auto model = LoadCase(name);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  const int chunk_steps = 1 + static_cast<int>(rng() % 5);
  auto servable =
      server::Servable::FromModel(*std::move(model), 1, CellularConfig(name, kind, chunk_steps));
  if (servable.status().code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "no kernel for a layer yet: " << servable.status().message();
  }
  ASSERT_TRUE(servable.ok()) << servable.status();
  if ((*servable)->scheduler() != "cellular") {
    GTEST_SKIP() << "not batched step by step: " << (*servable)->scheduler_reason();
  }
  std::vector<engine::Tensor> inputs;
  for (const Json& in : c["inputs"]) {
    const client::NpyArray a = LoadNpy(dir + "/" + in.get<std::string>());
    inputs.push_back(a.is_integer() ? ToInt64Tensor(a) : ToFloatTensor(a));
  }
  const int64_t rows = inputs[0].dim(0);
  std::vector<int64_t> order(rows);
  for (int64_t r = 0; r < rows; ++r) order[r] = r;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<absl::Duration> delays;
  for (int64_t r = 0; r < rows; ++r) delays.push_back(absl::Microseconds(rng() % 400));
  std::vector<std::vector<engine::Tensor>> answers(rows);
  std::vector<absl::Status> statuses(rows);
  std::vector<std::thread> clients;
  for (int64_t i = 0; i < rows; ++i) {
    clients.emplace_back([&, i] {
      const int64_t r = order[i];
      absl::SleepFor(delays[i]);
      engine::Batch batch;
      for (const engine::Tensor& t : inputs) batch.inputs.push_back(server::SliceRows(t, r, r + 1));
      statuses[r] = (*servable)->Run(batch, &answers[r]);
    });
  }
  for (std::thread& t : clients) t.join();
  const Tolerance tol = kind == EngineKind::kCuda ? kFp32CrossEngine : kFp32Exact;
  for (size_t o = 0; o < c["outputs"].size(); ++o) {
    const client::NpyArray want = LoadNpy(dir + "/" + c["outputs"][o].get<std::string>());
    std::vector<engine::Tensor> pieces;
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << "row " << r << ": " << statuses[r];
      pieces.push_back(answers[r][o]);
    }
    EXPECT_TRUE(AllClose(server::ConcatRows(pieces), want, tol))
        << "output " << o << ", chunks of up to " << chunk_steps << " steps";
  }
}

std::vector<Case> Cases(EngineKind kind) {
  std::vector<Case> cases;
  for (const std::string& n : testing::KerasCaseNames()) cases.emplace_back(kind, n);
  return cases;
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return std::get<1>(info.param); }

// Instances are named Cpu and Gpu: tests/CMakeLists.txt labels */Gpu gpu and the rest as given.
INSTANTIATE_TEST_SUITE_P(Cpu, CellularConformance, ::testing::ValuesIn(Cases(EngineKind::kCpu)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Gpu, CellularConformance, ::testing::ValuesIn(Cases(EngineKind::kCuda)),
                         CaseName);

// Which models run step by step, and what the others say.
TEST(CellularEligibility, CausalModelsRunStepByStepAndOthersSayWhy) {
  for (const char* name : {"Keras2StackedLstm", "Keras2MaskingMixedLengths",
                           "Keras2LstmReturnSequencesTimeDistributedSoftmax",
                           "Keras2GruReturnStateLast", "Keras2EmbeddingMaskZero"}) {
    auto model = LoadCase(name);
    ASSERT_TRUE(model.ok()) << name << ": " << model.status();
    auto s = server::Servable::FromModel(*std::move(model), 1,
                                         CellularConfig(name, EngineKind::kCpu, 4));
    ASSERT_TRUE(s.ok()) << name << ": " << s.status();
    EXPECT_EQ((*s)->scheduler(), "cellular") << name << ": " << (*s)->scheduler_reason();
  }
  auto model = LoadCase("Keras2BidirectionalLstmConcat");
  ASSERT_TRUE(model.ok());
  auto s =
      server::Servable::FromModel(*std::move(model), 1, CellularConfig("bi", EngineKind::kCpu, 4));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->scheduler(), "dynamic");
  EXPECT_NE((*s)->scheduler_reason().find("backwards"), std::string::npos)
      << (*s)->scheduler_reason();
}

}  // namespace
}  // namespace rnnserve::testing
