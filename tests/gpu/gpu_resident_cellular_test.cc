// Step-level batching on the GPU engine's resident step loop (cellular_batching
// { resident_step_loop: true }): every case of the Keras corpus (models/scripts/
// make_keras_fixtures.py) the loop runs, its rows sent as separate requests in a random order
// and at random moments, so they join and leave the loop at different steps, matches Keras.
// Cases the loop does not run keep chunks (the scheduler says why) and are left to
// cellular_conformance_test.

#include <algorithm>
#include <functional>
#include <random>
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

absl::StatusOr<engine::Model> LoadCase(const std::string& name) {
  const Json& c = KerasCorpusManifest()["cases"][name];
  const std::string dir = std::string(kKerasCorpus) + "/" + name;
  const Json& f = c["files"][0];
  models::LoadOptions options;
  if (f.contains("architecture")) {
    options.architecture_json_path = SourcePath(dir + "/" + f["architecture"].get<std::string>());
  }
  return models::LoadModelFile(SourcePath(dir + "/" + f["file"].get<std::string>()), options);
}

v1::ModelConfig ResidentConfig(const std::string& name) {
  v1::ModelConfig config;
  google::protobuf::TextFormat::ParseFromString(
      absl::StrCat("name: '", name,
                   "' max_batch_size: 16 instance_group { kind: KIND_GPU count: 1 } "
                   "cellular_batching { max_active_sequences: 4 resident_step_loop: true }"),
      &config);
  return config;
}

TEST(GpuResidentCellular, KerasRowsArrivingApartMatchKeras) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  int resident = 0;
  for (const std::string& name : KerasCaseNames()) {
    SCOPED_TRACE(name);
    const Json& c = KerasCorpusManifest()["cases"][name];
    const std::string dir = std::string(kKerasCorpus) + "/" + name;
    auto model = LoadCase(name);
    if (!model.ok()) continue;
    auto servable = server::Servable::FromModel(*std::move(model), 1, ResidentConfig(name));
    if (!servable.ok() || (*servable)->cellular() == nullptr) continue;
    if (!(*servable)->cellular()->resident()) {
      std::printf("[ chunks   ] %s: %s\n", name.c_str(),
                  (*servable)->cellular()->resident_note().c_str());
      continue;
    }
    ++resident;
    std::vector<engine::Tensor> inputs;
    for (const Json& in : c["inputs"]) {
      inputs.push_back(ToFloatTensor(LoadNpy(dir + "/" + in.get<std::string>())));
    }
    const int64_t rows = inputs[0].dim(0);
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>{}(name)));
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
        for (const engine::Tensor& t : inputs) {
          batch.inputs.push_back(server::SliceRows(t, r, r + 1));
        }
        statuses[r] = (*servable)->Run(batch, &answers[r]);
      });
    }
    for (std::thread& t : clients) t.join();
    for (size_t o = 0; o < c["outputs"].size(); ++o) {
      const client::NpyArray want = LoadNpy(dir + "/" + c["outputs"][o].get<std::string>());
      std::vector<engine::Tensor> pieces;
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(statuses[r].ok()) << "row " << r << ": " << statuses[r];
        pieces.push_back(answers[r][o]);
      }
      EXPECT_TRUE(AllClose(server::ConcatRows(pieces), want, kFp32CrossEngine)) << "output " << o;
    }
    std::printf("[ resident ] %s: %lld rows\n", name.c_str(), static_cast<long long>(rows));
  }
  EXPECT_GE(resident, 3) << "the corpus holds three single-layer LSTM and GRU cases";
}

}  // namespace
}  // namespace rnnserve::testing
