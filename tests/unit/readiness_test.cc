// server/readiness.h over a real model repository: the example Keras model beside a model whose
// file is not HDF5, strict and not, and how readiness follows loads, failed reloads, unloads
// (ModelRepository::Subscribe) and the drain.

#include "server/readiness.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model_repository.h"
#include "tests/support/fixtures.h"

namespace rnnserve::server {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class ReadinessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() /
            ("rnnserve_readiness_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_);
  }
  void TearDown() override { fs::remove_all(repo_); }

  // <repo>/<model>/<version>/model.h5: the example's Keras file.
  void AddGood(const std::string& model, int version) {
    const fs::path dir = repo_ / model / std::to_string(version);
    fs::create_directories(dir);
    fs::copy_file(testing::SourcePath("models/examples/waveform_lstm/1/model.h5"), dir / "model.h5",
                  fs::copy_options::overwrite_existing);
  }
  // <repo>/<model>/<version>/model.h5 that is not an HDF5 file.
  void AddBroken(const std::string& model, int version) {
    const fs::path dir = repo_ / model / std::to_string(version);
    fs::create_directories(dir);
    std::ofstream(dir / "model.h5") << "this is not HDF5";
  }
  std::unique_ptr<ModelRepository> Open() {
    auto repo = ModelRepository::Open(repo_.string());
    EXPECT_TRUE(repo.ok()) << repo.status();
    return repo.ok() ? *std::move(repo) : nullptr;
  }

  fs::path repo_;
};

TEST_F(ReadinessTest, NotReadyUntilTheInitialLoadsAreDoneButLive) {
  AddGood("good", 1);
  auto repo = ModelRepository::Create(repo_.string());
  ASSERT_TRUE(repo.ok()) << repo.status();
  for (bool strict : {true, false}) {
    Readiness readiness(repo->get(), {.strict = strict});
    EXPECT_TRUE(readiness.Live());
    const absl::Status s = readiness.CheckReady();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_THAT(s.message(), HasSubstr("initial model loads are running"));
  }
  (*repo)->LoadAll();
  EXPECT_TRUE(Readiness(repo->get(), {}).Ready());
}

TEST_F(ReadinessTest, StrictIsNotReadyWithABrokenModelAndNamesIt) {
  AddGood("good", 1);
  AddBroken("broken", 1);
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  Readiness strict(repo.get(), {});
  const absl::Status s = strict.CheckReady();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("model 'broken' is not loaded"),
                                 HasSubstr("not an HDF5 file"), HasSubstr("--strict-readiness")));
  EXPECT_TRUE(strict.Live());
  // Not strict: ready once every model has been tried.
  EXPECT_TRUE(Readiness(repo.get(), {.strict = false}).Ready());
}

TEST_F(ReadinessTest, ModelDirectoryWithoutVersionsIsNotLoaded) {
  // What mounting a source folder instead of a model repository looks like.
  fs::create_directories(repo_ / "scripts");
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  EXPECT_THAT(Readiness(repo.get(), {}).CheckReady().message(),
              HasSubstr("model 'scripts' is not loaded"));
}

TEST_F(ReadinessTest, EmptyRepositoryIsReady) {
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  EXPECT_TRUE(Readiness(repo.get(), {}).Ready());
}

TEST_F(ReadinessTest, FollowsUnloadAndLoadWithAnEventForEach) {
  AddGood("good", 1);
  AddBroken("broken", 1);
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  Readiness readiness(repo.get(), {});
  std::vector<bool> heard;
  const int id = repo->Subscribe([&] { heard.push_back(readiness.Ready()); });
  ASSERT_FALSE(readiness.Ready());
  ASSERT_TRUE(repo->Unload("broken").ok());
  EXPECT_TRUE(readiness.Ready());
  EXPECT_FALSE(repo->Load("broken").ok());  // asked for again, and fails again
  EXPECT_FALSE(readiness.Ready());
  fs::remove_all(repo_ / "broken");
  AddGood("broken", 1);
  ASSERT_TRUE(repo->Load("broken").ok());
  EXPECT_TRUE(readiness.Ready());
  EXPECT_EQ(heard, (std::vector<bool>{true, false, true}));
  repo->Unsubscribe(id);
  ASSERT_TRUE(repo->Unload("broken").ok());
  EXPECT_EQ(heard.size(), 3u);
}

TEST_F(ReadinessTest, PollFollowsModelsAddedFixedAndRemoved) {
  AddGood("good", 1);
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  Readiness readiness(repo.get(), {});
  int events = 0;
  const int id = repo->Subscribe([&] { ++events; });
  ASSERT_TRUE(readiness.Ready());
  AddBroken("late", 1);
  repo->Poll();
  EXPECT_THAT(readiness.CheckReady().message(), HasSubstr("model 'late' is not loaded"));
  fs::remove_all(repo_ / "late");
  repo->Poll();
  EXPECT_TRUE(readiness.Ready());
  EXPECT_GE(events, 2);
  repo->Unsubscribe(id);
}

// Triton's strict readiness asks for every version the policy selects: a newer version that
// fails to load makes the server not ready, although the one loaded before still serves.
TEST_F(ReadinessTest, NewestVersionThatFailsToLoadMakesItNotReadyWhileTheOldServes) {
  AddGood("good", 1);
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  Readiness readiness(repo.get(), {});
  ASSERT_TRUE(readiness.Ready());
  AddBroken("good", 2);
  EXPECT_FALSE(repo->Load("good").ok());
  EXPECT_TRUE(repo->Get("good", 1).ok());  // v1 still serves
  const absl::Status s = readiness.CheckReady();
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("model 'good' is serving versions loaded before its newest files "
                              "failed"),
                    HasSubstr("not an HDF5 file")));
  EXPECT_TRUE(Readiness(repo.get(), {.strict = false}).Ready());
  fs::remove_all(repo_ / "good" / "2");
  ASSERT_TRUE(repo->Load("good").ok());
  EXPECT_TRUE(readiness.Ready());
}

TEST_F(ReadinessTest, ShutdownIsNeverReadyAndStaysLive) {
  AddGood("good", 1);
  auto repo = Open();
  ASSERT_NE(repo, nullptr);
  Readiness readiness(repo.get(), {});
  ASSERT_TRUE(readiness.Ready());
  readiness.Shutdown();
  EXPECT_THAT(readiness.CheckReady().message(), HasSubstr("shutting down"));
  EXPECT_TRUE(readiness.Live());
}

}  // namespace
}  // namespace rnnserve::server
