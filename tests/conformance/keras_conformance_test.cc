// The Keras conformance corpus (models/scripts/make_keras_fixtures.py): every case, in every
// format its Keras version writes, loads, compiles on the CPU engine and matches the real
// Keras's float64 predictions to 1e-5 relative (1e-6 absolute near zero). Test names are the
// case names. A case whose layer has no CPU kernel yet is skipped, naming the layer. The
// corpus's refused files fail to load with the message the manifest gives.

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"
#include "tests/support/keras_corpus.h"

namespace rnnserve {
namespace {

using Json = nlohmann::json;
using testing::AllClose;
using testing::LoadNpy;
using testing::SourcePath;

constexpr const char* kCorpus = testing::kKerasCorpus;

const Json& Manifest() { return testing::KerasCorpusManifest(); }

engine::Tensor InputTensor(const client::NpyArray& a) {
  return a.is_integer() ? testing::ToInt64Tensor(a) : testing::ToFloatTensor(a);
}

class KerasConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(KerasConformance, MatchesKeras) {
  const std::string name = GetParam();
  const Json& c = Manifest()["cases"][name];
  const std::string dir = std::string(kCorpus) + "/" + name;
  auto engine = engine::Engine::Create({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  for (const Json& f : c["files"]) {
    const std::string file = f["file"].get<std::string>();
    SCOPED_TRACE(file + " (Keras " + c["keras"].get<std::string>() + ")");
    models::LoadOptions options;
    if (f.contains("architecture")) {
      options.architecture_json_path = SourcePath(dir + "/" + f["architecture"].get<std::string>());
    }
    auto model = models::LoadModelFile(SourcePath(dir + "/" + file), options);
    ASSERT_TRUE(model.ok()) << model.status();
    auto compiled = (*engine)->Compile(*model, {});
    if (compiled.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "no CPU kernel yet: " << compiled.status().message();
    }
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    engine::Batch batch;
    for (const Json& in : c["inputs"]) {
      batch.inputs.push_back(InputTensor(LoadNpy(dir + "/" + in.get<std::string>())));
    }
    std::vector<engine::Tensor> out;
    ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
    ASSERT_EQ(out.size(), c["outputs"].size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_TRUE(AllClose(out[i], LoadNpy(dir + "/" + c["outputs"][i].get<std::string>())))
          << "output " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, KerasConformance, ::testing::ValuesIn(testing::KerasCaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// Files the reader must refuse (a mask other than a Masking or Embedding layer's, initial states
// wired in the graph): the load fails with INVALID_ARGUMENT and the manifest's message.
std::vector<std::string> RefusedNames() {
  std::vector<std::string> names;
  const Json& refused = Manifest()["refused"];
  if (refused.is_object()) {
    for (const auto& [name, c] : refused.items()) names.push_back(name);
  }
  return names;
}

class KerasRefused : public ::testing::TestWithParam<std::string> {};

TEST_P(KerasRefused, LoadFailsNamingWhy) {
  const Json& c = Manifest()["refused"][GetParam()];
  const std::string file =
      std::string(kCorpus) + "/refused/" + GetParam() + "/" + c["file"].get<std::string>();
  auto model = models::LoadModelFile(SourcePath(file), {});
  ASSERT_FALSE(model.ok()) << "loaded " << file;
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << model.status();
  EXPECT_NE(model.status().message().find(c["message"].get<std::string>()), std::string::npos)
      << model.status();
}

INSTANTIATE_TEST_SUITE_P(Corpus, KerasRefused, ::testing::ValuesIn(RefusedNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(KerasCorpus, HasAtLeastThirtyCasesFromBothKerasLines) {
  const std::vector<std::string> names = testing::KerasCaseNames();
  EXPECT_GE(names.size(), 30u);
  int keras2 = 0, keras3 = 0;
  for (const std::string& n : names) {
    const std::string v = Manifest()["cases"][n]["keras"].get<std::string>();
    (v[0] == '2' ? keras2 : keras3)++;
  }
  EXPECT_GT(keras2, 0);
  EXPECT_GT(keras3, 0);
}

}  // namespace
}  // namespace rnnserve
