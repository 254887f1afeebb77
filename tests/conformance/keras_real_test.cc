// The five real Keras files of ../shared/models/keras-real (saved by Keras 2.0.4 to 3.12 in
// public repositories) load, compile on the CPU engine and match the predictions of the Keras
// that loads each (expected outputs: models/scripts/make_keras_fixtures.py, tests/fixtures/
// keras/real/). The files are not in the repository; every test skips, saying so, where the
// folder is absent.

#include <string>
#include <vector>

#include "engine/engine.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/support/fixtures.h"

namespace rnnserve {
namespace {

using engine::ActivationKind;
using engine::RecurrentSpec;
using testing::AllClose;
using testing::LoadNpy;
using testing::SharedModelsDir;

class KerasRealFile : public ::testing::Test {
 protected:
  // Loads `file` into model_; skips when the shared folder is absent.
  void Load(const std::string& file) {
    if (SharedModelsDir().empty()) {
      GTEST_SKIP() << "../shared/models/keras-real is absent; real Keras files not tested";
    }
    auto model = models::LoadModelFile(SharedModelsDir() + "/" + file);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::move(*model);
  }
  void ExpectMatchesKeras(const std::string& stem, int outputs = 1) {
    auto engine = engine::Engine::Create({});
    ASSERT_TRUE(engine.ok());
    auto compiled = (*engine)->Compile(model_, {});
    if (compiled.status().code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << "no CPU kernel yet: " << compiled.status().message();
    }
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const std::string dir = "tests/fixtures/keras/real/" + stem;
    engine::Batch batch;
    batch.inputs.push_back(testing::ToFloatTensor(LoadNpy(dir + "/input_0.npy")));
    std::vector<engine::Tensor> out;
    ASSERT_TRUE((*compiled)->Run(batch, &out).ok());
    ASSERT_EQ(static_cast<int>(out.size()), outputs);
    for (int i = 0; i < outputs; ++i) {
      EXPECT_TRUE(AllClose(out[i], LoadNpy(dir + "/expected_" + std::to_string(i) + ".npy")))
          << "output " << i;
    }
  }
  std::vector<const RecurrentSpec*> Recurrent() const {
    std::vector<const RecurrentSpec*> out;
    for (const auto& l : model_.layers) {
      if (const auto* r = std::get_if<RecurrentSpec>(&l.spec)) out.push_back(r);
    }
    return out;
  }
  engine::Model model_;
};

TEST_F(KerasRealFile, Keras204GruWithoutResetAfterKeyIsResetAfterFalseHardSigmoid) {
  Load("aind_nlp_gru_timedistributed.h5");
  if (IsSkipped()) return;
  const auto rnn = Recurrent();
  ASSERT_EQ(rnn.size(), 1u);
  EXPECT_EQ(rnn[0]->cell, engine::CellType::kGru);
  EXPECT_FALSE(rnn[0]->reset_after);
  EXPECT_EQ(rnn[0]->directions[0].f, engine::Activation::HardSigmoidKeras2());
  ExpectMatchesKeras("aind_nlp_gru_timedistributed");
}

TEST_F(KerasRealFile, Keras222BareListConfigLstmHardSigmoidMatchesKeras) {
  Load("arabic_sentiment_lstm.h5");
  if (IsSkipped()) return;
  const auto rnn = Recurrent();
  ASSERT_EQ(rnn.size(), 1u);
  EXPECT_EQ(rnn[0]->directions[0].f, engine::Activation::HardSigmoidKeras2());
  EXPECT_EQ(model_.inputs[0].shape, (engine::Shape{-1, 1, 200}));
  ExpectMatchesKeras("arabic_sentiment_lstm");
}

TEST_F(KerasRealFile, Keras210StackedGruResetAfterMatchesKeras) {
  Load("elec_gru3_reset_after.h5");
  if (IsSkipped()) return;
  const auto rnn = Recurrent();
  ASSERT_EQ(rnn.size(), 3u);
  for (const RecurrentSpec* r : rnn) {
    EXPECT_TRUE(r->reset_after);
    EXPECT_EQ(r->directions[0].f.kind, ActivationKind::kSigmoid);
  }
  ExpectMatchesKeras("elec_gru3_reset_after");
}

TEST_F(KerasRealFile, Keras3LegacyH5BidirectionalLstmMatchesKeras) {
  Load("k3_sensor_bilstm.h5");
  if (IsSkipped()) return;
  const auto rnn = Recurrent();
  ASSERT_EQ(rnn.size(), 2u);
  EXPECT_EQ(rnn[0]->directions.size(), 2u);
  EXPECT_TRUE(rnn[0]->directions[1].reverse);
  ExpectMatchesKeras("k3_sensor_bilstm");
}

TEST_F(KerasRealFile, Keras312DotKerasStackedLstmMatchesKeras) {
  Load("k3_weather_lstm2.keras");
  if (IsSkipped()) return;
  const auto rnn = Recurrent();
  ASSERT_EQ(rnn.size(), 2u);
  EXPECT_EQ(rnn[0]->hidden_size, 128);
  EXPECT_EQ(model_.source_format, "keras");
  ExpectMatchesKeras("k3_weather_lstm2");
}

}  // namespace
}  // namespace rnnserve
