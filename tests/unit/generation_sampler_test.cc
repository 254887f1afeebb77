// The generation sampler and vocabulary (server/generation/): greedy is np.argmax; seeded draws
// are reproducible and, over the first step's softmax that tf-keras computed for the fixture LM
// (models/scripts/make_generation_fixtures.py), their frequencies pass a chi-square bound with
// fixed seeds; top-k and top-p keep the tokens they say; vocab.json encodes and decodes as
// textgenrnn's does.

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/generation/sampler.h"
#include "server/generation/vocabulary.h"
#include "tests/support/fixtures.h"

namespace rnnserve::server::generation {
namespace {

nlohmann::json Expected() {
  std::ifstream in(testing::SourcePath("tests/fixtures/generation/expected.json"));
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::vector<float> FirstStepProbs(const std::string& model) {
  const nlohmann::json expected = Expected();  // outlives the loop over its member
  std::vector<float> p;
  for (double x : expected[model]["first_step_probs"]) p.push_back(static_cast<float>(x));
  return p;
}

TEST(GenerationSampler, GreedyIsTheFirstLargestAsNpArgmax) {
  const std::vector<float> row = {0.1f, 0.4f, 0.1f, 0.4f};
  EXPECT_EQ(ChooseToken(row, true, {.temperature = 0}, 0.99), 1);
  const std::vector<float> logits = {-1.0f, 2.0f, 3.5f, 3.5f};
  EXPECT_EQ(ChooseToken(logits, false, {.temperature = 0}, 0.5), 2);
}

TEST(GenerationSampler, DrawsAreCounterBasedAndReproducible) {
  EXPECT_EQ(UniformDraw(7, 0, 0), UniformDraw(7, 0, 0));
  EXPECT_NE(UniformDraw(7, 0, 0), UniformDraw(8, 0, 0));
  EXPECT_NE(UniformDraw(7, 0, 0), UniformDraw(7, 1, 0));
  EXPECT_NE(UniformDraw(7, 0, 0), UniformDraw(7, 0, 1));
  EXPECT_NE(UniformDraw(7, 1, 0), UniformDraw(7, 0, 1));
  double mean = 0;
  for (uint64_t t = 0; t < 10000; ++t) {
    const double u = UniformDraw(3, 0, t);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u / 10000;
  }
  EXPECT_NEAR(mean, 0.5, 0.02);  // fixed seed: the same mean every run
}

TEST(GenerationSampler, FirstStepFrequenciesMatchKerasSoftmax) {
  for (const char* model : {"alice_lstm", "alice_window"}) {
    const std::vector<float> p = FirstStepProbs(model);
    ASSERT_TRUE(IsDistribution(p)) << model;
    constexpr int kDraws = 20000;
    std::vector<double> counts(p.size());
    for (int s = 0; s < kDraws; ++s) {
      ++counts[ChooseToken(p, true, {.temperature = 1}, UniformDraw(11, s, 0))];
    }
    double chi2 = 0, pooled_obs = 0, pooled_exp = 0;
    int bins = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      const double e = p[i] * kDraws;
      if (e < 5) {
        pooled_obs += counts[i];
        pooled_exp += e;
        continue;
      }
      chi2 += (counts[i] - e) * (counts[i] - e) / e;
      ++bins;
    }
    if (pooled_exp > 0) {
      chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
      ++bins;
    }
    const double df = bins - 1;
    // The chi-square quantile at 1 - 5e-4 (Wilson-Hilferty).
    const double bound = df * std::pow(1 - 2 / (9 * df) + 3.29 * std::sqrt(2 / (9 * df)), 3);
    EXPECT_LT(chi2, bound) << model << ": " << df << " degrees of freedom";
  }
}

TEST(GenerationSampler, ProbabilitiesAndTheirLogitsSampleAlike) {
  const std::vector<float> p = FirstStepProbs("alice_lstm");
  std::vector<float> logits;
  for (float x : p) logits.push_back(std::log(x) + 3.0f);  // shifted: softmax is the same
  for (int s = 0; s < 200; ++s) {
    const double u = UniformDraw(5, s, 0);
    EXPECT_EQ(ChooseToken(p, true, {.temperature = 0.7}, u),
              ChooseToken(logits, false, {.temperature = 0.7}, u))
        << s;
  }
}

TEST(GenerationSampler, TopKAndTopPKeepOnlyTheMostProbable) {
  const std::vector<float> p = {0.05f, 0.5f, 0.3f, 0.15f};
  for (int s = 0; s < 500; ++s) {
    const double u = UniformDraw(1, s, 0);
    const int64_t k2 = ChooseToken(p, true, {.temperature = 1, .top_k = 2}, u);
    EXPECT_TRUE(k2 == 1 || k2 == 2) << k2;
    // 0.5 + 0.3 reach 0.7: the smallest such set.
    const int64_t p7 = ChooseToken(p, true, {.temperature = 1, .top_p = 0.7}, u);
    EXPECT_TRUE(p7 == 1 || p7 == 2) << p7;
    EXPECT_EQ(ChooseToken(p, true, {.temperature = 1, .top_k = 1}, u), 1);
  }
}

TEST(GenerationVocabulary, CharactersEncodeAndDecodeAsTextgenrnn) {
  auto vocab = Vocabulary::Load(
      testing::SourcePath("tests/fixtures/generation/repo/alice_lstm/1/vocab.json"));
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_TRUE(vocab->characters());
  auto ids = vocab->Encode("Alice was ");
  ASSERT_TRUE(ids.ok()) << ids.status();
  const std::vector<int64_t> want =
      Expected()["alice_lstm"]["prompt_ids"].get<std::vector<int64_t>>();
  EXPECT_EQ(*ids, want);
  std::string text;
  for (int64_t id : *ids) text += vocab->Decode(id);
  EXPECT_EQ(text, "Alice was ");
  EXPECT_EQ(vocab->Decode(0), "");  // the padding id
  auto bad = vocab->Encode("Alice~");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'~' at byte 5"), std::string::npos) << bad.status();
}

TEST(GenerationVocabulary, WordsSplitOnSpacesAndBadFilesAreRefused) {
  auto vocab = Vocabulary::Parse(R"({"the": 1, "rabbit": 2, "ran": 3})", "vocab.json");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_FALSE(vocab->characters());
  EXPECT_EQ(*vocab->Encode("the  rabbit ran"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(vocab->Decode(2), "rabbit ");
  EXPECT_FALSE(vocab->Encode("the cat").ok());
  EXPECT_EQ(Vocabulary::Parse("[1, 2]", "v.json").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Vocabulary::Parse(R"({"a": -1})", "v.json").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Vocabulary::Parse("{not json", "v.json").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rnnserve::server::generation
