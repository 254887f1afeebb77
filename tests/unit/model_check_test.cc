// server/model_check.h: the child-process parse of a model file, with stand-in children (shell
// scripts) that finish, reject, hang or crash.

#include "server/model_check.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/support/fixtures.h"

namespace rnnserve::server {
namespace {

namespace fs = std::filesystem;

class ModelCheckTest : public ::testing::Test {
 protected:
  // An executable script that stands in for `rnnserve --check-model FILE`.
  std::string Child(const std::string& name, const std::string& body) {
    const fs::path p = fs::temp_directory_path() /
                       ("rnnserve_check_" + std::to_string(getpid()) + "_" + name + ".sh");
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    chmod(p.c_str(), 0755);
    scripts_.push_back(p);
    return p.string();
  }
  void TearDown() override {
    EnableModelFileCheck("", absl::ZeroDuration());
    for (const fs::path& p : scripts_) fs::remove(p);
  }
  std::vector<fs::path> scripts_;
};

TEST_F(ModelCheckTest, OffUntilEnabled) {
  EXPECT_TRUE(CheckModelFile("/no/such/file.h5", {}).ok());
}

TEST_F(ModelCheckTest, AChildThatFinishesPassesWhateverItFound) {
  // Rejections are left to the in-process parse, which reports them with their own code.
  EnableModelFileCheck(Child("ok", "exit 0"), absl::Seconds(10));
  EXPECT_TRUE(CheckModelFile("model.h5", {}).ok());
  EnableModelFileCheck(Child("reject", "echo bad >&2; exit 1"), absl::Seconds(10));
  EXPECT_TRUE(CheckModelFile("model.h5", {}).ok());
}

TEST_F(ModelCheckTest, AChildPastTheLimitIsKilledAndTheLoadFails) {
  EnableModelFileCheck(Child("hang", "exec sleep 30"), absl::Milliseconds(300));
  const absl::Status s = CheckModelFile("model.h5", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "model.h5: parsing did not finish within 300ms")) << s;
}

TEST_F(ModelCheckTest, AChildThatCrashesFailsTheLoadNamingTheSignal) {
  EnableModelFileCheck(Child("crash", "kill -SEGV $$"), absl::Seconds(10));
  const absl::Status s = CheckModelFile("model.h5", {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "crashed the model file check")) << s;
}

TEST_F(ModelCheckTest, TheChildGetsTheFileAndTheLoadOptions) {
  const fs::path args =
      fs::temp_directory_path() / ("rnnserve_check_args_" + std::to_string(getpid()));
  EnableModelFileCheck(Child("args", "echo \"$@\" > " + args.string()), absl::Seconds(10));
  models::LoadOptions options;
  options.format = "keras_h5";
  options.architecture_json_path = "arch.json";
  ASSERT_TRUE(CheckModelFile("w.h5", options).ok());
  std::string line;
  std::getline(std::ifstream(args), line);
  EXPECT_EQ(line, "--check-model w.h5 --format keras_h5 --architecture arch.json");
  fs::remove(args);
}

// Servable::CheckFile checks a file before Servable::Load, which checks it again: the second
// check of the unchanged file passes without a child, once; a rewritten file is checked again.
TEST_F(ModelCheckTest, APassedCheckIsTakenOnceByTheNextCheckOfTheUnchangedFile) {
  const std::string tag = std::to_string(getpid());
  const fs::path runs = fs::temp_directory_path() / ("rnnserve_check_runs_" + tag);
  const fs::path file = fs::temp_directory_path() / ("rnnserve_check_file_" + tag + ".h5");
  std::ofstream(file) << "a";
  EnableModelFileCheck(Child("count", "echo run >> " + runs.string()), absl::Seconds(10));
  auto count = [&] {
    std::ifstream in(runs);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  ASSERT_TRUE(CheckModelFile(file.string(), {}).ok());
  ASSERT_TRUE(CheckModelFile(file.string(), {}).ok());
  EXPECT_EQ(count(), 1);
  ASSERT_TRUE(CheckModelFile(file.string(), {}).ok());  // the pass was taken
  EXPECT_EQ(count(), 2);
  std::ofstream(file) << "b";  // rewritten after the pass
  ASSERT_TRUE(CheckModelFile(file.string(), {}).ok());
  EXPECT_EQ(count(), 3);
  models::LoadOptions other;
  other.format = "onnx";
  ASSERT_TRUE(CheckModelFile(file.string(), other).ok());  // other options: another check
  EXPECT_EQ(count(), 4);
  fs::remove(runs);
  fs::remove(file);
}

TEST_F(ModelCheckTest, TheChildSideLoadsTheFile) {
  std::string mode = "--check-model", missing = "/no/such/model.h5", bad = "--no-such-flag";
  char* loads[] = {mode.data(), missing.data()};
  EXPECT_EQ(RunModelCheck(2, loads), 1);
  char* no_file[] = {mode.data()};
  EXPECT_EQ(RunModelCheck(1, no_file), 2);
  char* unknown[] = {mode.data(), missing.data(), bad.data()};
  EXPECT_EQ(RunModelCheck(3, unknown), 2);
  // The command line CheckModelFile gives the child (above), on a file that parses.
  std::string model = testing::SourcePath("models/examples/waveform_lstm/1/model.h5");
  std::string format_flag = "--format", format = "keras_h5";
  char* parses[] = {mode.data(), model.data(), format_flag.data(), format.data()};
  EXPECT_EQ(RunModelCheck(4, parses), 0);
}

}  // namespace
}  // namespace rnnserve::server
