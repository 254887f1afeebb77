// The model repository against the real server: LoadModel/UnloadModel, polling, and a reload
// under concurrent load that fails no request.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "client/client.h"
#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

// Whether a model file check child (`rnnserve --check-model ...<needle>...`) runs now.
bool CheckChildRuns(const std::string& needle) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find("--check-model") != std::string::npos && cmd.find(needle) != std::string::npos)
      return true;
  }
  return false;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = fs::temp_directory_path() /
            ("rnnserve_repo_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    AddVersion("m", 1);
  }
  void TearDown() override { fs::remove_all(repo_); }
  void AddVersion(const std::string& model, int version) {
    fs::create_directories(repo_ / model / std::to_string(version));
    fs::copy_file(SourcePath("models/examples/waveform_lstm/1/model.h5"),
                  repo_ / model / std::to_string(version) / "model.h5",
                  fs::copy_options::overwrite_existing);
  }
  std::unique_ptr<v1::RnnServe::Stub> Stub(const ServerProcess& s) {
    return v1::RnnServe::NewStub(
        grpc::CreateChannel(s.address(), grpc::InsecureChannelCredentials()));
  }
  std::vector<int64_t> Versions(const ServerProcess& s, const std::string& model) {
    client::RnnServeClient c({.server = s.address()});
    auto list = c.List();
    for (const auto& m : list->models()) {
      if (m.name() == model && m.state() == "READY")
        return {m.versions().begin(), m.versions().end()};
    }
    return {};
  }
  void AddHangingVersion(const std::string& model) {
    fs::create_directories(repo_ / model / "1");
    fs::copy_file(SourcePath("tests/fixtures/corrupt/hdf5_global_heap_loop.h5"),
                  repo_ / model / "1" / "model.h5", fs::copy_options::overwrite_existing);
  }
  grpc::Status LoadModel(const ServerProcess& s, const std::string& name) {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name(name);
    v1::LoadModelResponse resp;
    return Stub(s)->LoadModel(&ctx, req, &resp);
  }
  fs::path repo_;
};

TEST_F(RepositoryTest, ReloadUnderConcurrentLoadFailsNoRequest) {
  auto server = ServerProcess::Start(repo_.string());
  ASSERT_TRUE(server.ok()) << server.status();
  const client::NpyArray input = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray expected = LoadNpy("tests/fixtures/example/expected.npy");
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0}, wrong{0}, saw_v2{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      client::RnnServeClient c({.server = (*server)->address()});
      while (!stop) {
        auto resp = c.Predict("m", {{"", input}}, {});
        if (!resp.ok()) {
          ++failed;
          continue;
        }
        ++ok;
        if (resp->model_spec().version() == 2) ++saw_v2;
        const client::NpyArray got = client::ToArray(resp->outputs().begin()->second);
        for (size_t i = 0; i < got.values.size(); ++i) {
          if (std::fabs(got.values[i] - expected.values[i]) > 1e-5) {
            ++wrong;
            break;
          }
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  AddVersion("m", 2);
  {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name("m");
    v1::LoadModelResponse resp;
    const grpc::Status s = Stub(**server)->LoadModel(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.status().versions_size(), 1);
    EXPECT_EQ(resp.status().versions(0), 2);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(ok.load(), 10);
  EXPECT_GT(saw_v2.load(), 0);
}

TEST_F(RepositoryTest, UnloadThenLoadAgain) {
  auto server = ServerProcess::Start(repo_.string());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Stub(**server);
  {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name("m");
    v1::UnloadModelResponse resp;
    ASSERT_TRUE(stub->UnloadModel(&ctx, req, &resp).ok());
  }
  client::RnnServeClient c({.server = (*server)->address()});
  auto gone = c.Metadata("m");
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  {
    grpc::ClientContext ctx;
    v1::UnloadModelRequest req;
    req.set_name("m");
    v1::UnloadModelResponse resp;
    EXPECT_EQ(stub->UnloadModel(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name("m");
    v1::LoadModelResponse resp;
    ASSERT_TRUE(stub->LoadModel(&ctx, req, &resp).ok());
  }
  EXPECT_TRUE(c.Metadata("m").ok());
  {
    grpc::ClientContext ctx;
    v1::LoadModelRequest req;
    req.set_name("../etc");  // not a model name: refused before any lookup
    v1::LoadModelResponse resp;
    EXPECT_EQ(stub->LoadModel(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_F(RepositoryTest, PollingPicksUpNewAndRemovedModels) {
  auto server = ServerProcess::Start(repo_.string(), {"--repository-poll-seconds", "1"});
  ASSERT_TRUE(server.ok()) << server.status();
  AddVersion("late", 1);
  bool appeared = false;
  for (int i = 0; i < 100 && !appeared; ++i) {
    appeared = !Versions(**server, "late").empty();
    if (!appeared) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(appeared);
  fs::remove_all(repo_ / "late");
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = Versions(**server, "late").empty();
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone);
  EXPECT_FALSE(Versions(**server, "m").empty());
}

TEST_F(RepositoryTest, VersionPolicyAllServesEveryVersion) {
  AddVersion("m", 3);
  std::ofstream(repo_ / "m" / "config.pbtxt") << "version_policy { all {} }\n";
  auto server = ServerProcess::Start(repo_.string());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Versions(**server, "m"), (std::vector<int64_t>{1, 3}));
  client::RnnServeClient c({.server = (*server)->address()});
  EXPECT_TRUE(c.Metadata("m", 1).ok());
  EXPECT_EQ(c.Metadata("m", 2).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RepositoryTest, BrokenModelIsUnavailableAndOthersServe) {
  fs::create_directories(repo_ / "broken" / "1");
  std::ofstream(repo_ / "broken" / "1" / "model.h5") << "this is not HDF5";
  // Ready once every model has been tried (strict readiness would wait for "broken" forever).
  auto server = ServerProcess::Start(repo_.string(), {"--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  client::RnnServeClient c({.server = (*server)->address()});
  auto meta = c.Metadata("broken");
  EXPECT_EQ(meta.status().code(), absl::StatusCode::kUnavailable) << meta.status();
  EXPECT_NE(meta.status().message().find("not an HDF5 file"), std::string::npos) << meta.status();
  EXPECT_TRUE(c.Metadata("m").ok());
}

// tests/fixtures/corrupt/hdf5_global_heap_loop.h5 makes Debian's libhdf5 1.10 loop forever in
// its global heap reader. The server parses each file first in a child process with a time
// limit: that model fails to load, the server starts, and the others serve.
TEST_F(RepositoryTest, ModelFileThatHangsTheParserFailsOnlyItsOwnLoad) {
  fs::create_directories(repo_ / "hang" / "1");
  fs::copy_file(SourcePath("tests/fixtures/corrupt/hdf5_global_heap_loop.h5"),
                repo_ / "hang" / "1" / "model.h5");
  const auto start = std::chrono::steady_clock::now();
  auto server = ServerProcess::Start(repo_.string(),
                                     {"--model-check-seconds", "2", "--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  client::RnnServeClient c({.server = (*server)->address()});
  auto meta = c.Metadata("hang");
  EXPECT_EQ(meta.status().code(), absl::StatusCode::kUnavailable) << meta.status();
  EXPECT_NE(meta.status().message().find("parsing did not finish within 2s"), std::string::npos)
      << meta.status();
  EXPECT_TRUE(c.Metadata("m").ok());
  EXPECT_TRUE((*server)->Alive());
}

// The port answers while the models load; health and KServe readiness say "not yet" until every
// model has been tried, as Triton's do, and then agree (not strict: a model that failed does not
// hold readiness back; tests/integration/health_integration_test.cc has the strict case).
TEST_F(RepositoryTest, ListensBeforeTheInitialLoadsFinishAndIsReadyAfter) {
  AddHangingVersion("a_hang");  // loaded first (the repository loads in name order)
  auto server = ServerProcess::Launch(repo_.string(),
                                      {"--model-check-seconds", "6", "--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE((*server)->Serving());
  auto kserve = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto server_ready = [&] {
    grpc::ClientContext ctx;
    inference::ServerReadyRequest req;
    inference::ServerReadyResponse resp;
    EXPECT_TRUE(kserve->ServerReady(&ctx, req, &resp).ok());
    return resp.ready();
  };
  EXPECT_FALSE(server_ready());
  bool serving = false;
  for (int i = 0; i < 300 && !serving; ++i) {
    serving = (*server)->Serving();
    if (!serving) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(serving);
  EXPECT_FALSE(Versions(**server, "m").empty());
  EXPECT_TRUE(server_ready());  // a_hang stays unavailable
}

// A file whose check hangs (a_hang, first in name order) beside a good model: the good model
// is READY and serves while a_hang's check still runs, and LoadModel of the good model answers
// meanwhile. (A repository that loads one model after another holds m back for a_hang's whole
// check, 600 s here, and LoadModel behind it.)
TEST_F(RepositoryTest, HangingCheckHoldsBackOnlyItsOwnModel) {
  AddHangingVersion("a_hang");
  auto server = ServerProcess::Launch(repo_.string(),
                                      {"--model-check-seconds", "600", "--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string needle = (repo_ / "a_hang").string();
  bool ready = false;
  for (int i = 0; i < 400 && !ready; ++i) {  // 20 s
    ready = !Versions(**server, "m").empty();
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ready) << "m is not READY 20 s after start while a_hang's file check hangs";
  EXPECT_TRUE(CheckChildRuns(needle)) << "a_hang's check is over: nothing was held back";

  const client::NpyArray input = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray expected = LoadNpy("tests/fixtures/example/expected.npy");
  client::RnnServeClient c({.server = (*server)->address()});
  auto resp = c.Predict("m", {{"", input}}, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const client::NpyArray got = client::ToArray(resp->outputs().begin()->second);
  ASSERT_EQ(got.values.size(), expected.values.size());
  for (size_t i = 0; i < got.values.size(); ++i) {
    ASSERT_NEAR(got.values[i], expected.values[i], 1e-5) << "at " << i;
  }

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::LoadModelRequest req;
  req.set_name("m");
  v1::LoadModelResponse load;
  const grpc::Status loaded = Stub(**server)->LoadModel(&ctx, req, &load);
  EXPECT_TRUE(loaded.ok()) << loaded.error_code() << " " << loaded.error_message();
  EXPECT_TRUE(CheckChildRuns(needle)) << "a_hang's check is over: nothing was held back";
  EXPECT_TRUE(Versions(**server, "a_hang").empty());
}

TEST_F(RepositoryTest, SigtermWhileLoadingExitsPromptlyAndLeavesNoCheckBehind) {
  AddHangingVersion("a_hang");
  auto server = ServerProcess::Launch(repo_.string(), {"--model-check-seconds", "600"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string needle = (repo_ / "a_hang").string();
  for (int i = 0; i < 100 && !CheckChildRuns(needle); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(CheckChildRuns(needle)) << "the model file check did not start";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ((*server)->Stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(CheckChildRuns(needle));
}

// A file that hangs the parser is checked once, not on every poll, until it changes.
TEST_F(RepositoryTest, FailedFileIsNotParsedAgainUntilItChanges) {
  AddHangingVersion("hang");
  const fs::path log = repo_.string() + ".log";
  auto server = ServerProcess::Start(
      repo_.string(),
      {"--model-check-seconds", "1", "--repository-poll-seconds", "1", "--strict-readiness=false"},
      {}, log.string());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string needle = (repo_ / "hang").string();
  bool checked_again = false;
  for (int i = 0; i < 80 && !checked_again; ++i) {  // 4 s: four polls
    checked_again = CheckChildRuns(needle);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(checked_again) << "an unchanged failed file was parsed again";
  // Rewritten (same bytes, so same size): its identity changed, and the next poll checks it.
  fs::copy_file(SourcePath("tests/fixtures/corrupt/hdf5_global_heap_loop.h5"),
                repo_ / "hang" / "1" / "model.h5", fs::copy_options::overwrite_existing);
  for (int i = 0; i < 100 && !checked_again; ++i) {
    checked_again = CheckChildRuns(needle);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(checked_again) << "a changed file was not checked again";
  // LoadModel always tries again.
  const grpc::Status s = LoadModel(**server, "hang");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("parsing did not finish within 1s"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE((*server)->Alive());
  EXPECT_EQ((*server)->Stop(), 0);
  const std::string text = ReadFile(log);
  int lines = 0;
  for (size_t at = text.find("model hang v1 failed to load"); at != std::string::npos;
       at = text.find("model hang v1 failed to load", at + 1)) {
    ++lines;
  }
  // The first failure, the changed file's, and LoadModel's (backed off: not one per poll).
  EXPECT_GE(lines, 1) << text;
  EXPECT_LE(lines, 3) << text;
  fs::remove(log);
}

TEST_F(RepositoryTest, SymlinkOutOfTheRepositoryIsRefusedUnlessAllowed) {
  const fs::path outside = repo_.string() + "_outside";
  fs::create_directories(outside);
  fs::copy_file(SourcePath("models/examples/waveform_lstm/1/model.h5"), outside / "model.h5",
                fs::copy_options::overwrite_existing);
  fs::create_directories(repo_ / "file_link" / "1");
  fs::create_symlink(outside / "model.h5", repo_ / "file_link" / "1" / "model.h5");
  fs::create_directory_symlink(outside, repo_ / "dir_link");  // dir_link/ holds no version dir
  fs::create_directories(outside / "1");
  fs::copy_file(outside / "model.h5", outside / "1" / "model.h5");
  // A link that stays inside the repository is fine.
  fs::create_directories(repo_ / "inner_link" / "1");
  fs::create_symlink(repo_ / "m" / "1" / "model.h5", repo_ / "inner_link" / "1" / "model.h5");
  {
    auto server = ServerProcess::Start(repo_.string(), {"--strict-readiness=false"});
    ASSERT_TRUE(server.ok()) << server.status();
    client::RnnServeClient c({.server = (*server)->address()});
    for (const char* name : {"file_link", "dir_link"}) {
      auto meta = c.Metadata(name);
      EXPECT_EQ(meta.status().code(), absl::StatusCode::kUnavailable) << name << meta.status();
      EXPECT_NE(meta.status().message().find("resolves outside the model repository"),
                std::string::npos)
          << meta.status();
      EXPECT_EQ(meta.status().message().find(repo_.string()), std::string::npos)
          << "an absolute path in: " << meta.status();
    }
    auto inner = c.Metadata("inner_link");
    EXPECT_TRUE(inner.ok()) << inner.status();
  }
  {
    auto server = ServerProcess::Start(repo_.string(), {"--allow-symlinks-outside-repository"});
    ASSERT_TRUE(server.ok()) << server.status();
    client::RnnServeClient c({.server = (*server)->address()});
    EXPECT_TRUE(c.Metadata("file_link").ok());
    EXPECT_TRUE(c.Metadata("dir_link").ok());
  }
  fs::remove_all(outside);
}

TEST_F(RepositoryTest, ErrorsAndMetadataNamePathsInsideTheRepository) {
  fs::create_directories(repo_ / "broken" / "1");
  std::ofstream(repo_ / "broken" / "1" / "model.h5") << "this is not HDF5";
  fs::create_directories(repo_ / "empty");
  auto server = ServerProcess::Start(repo_.string(), {"--strict-readiness=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  client::RnnServeClient c({.server = (*server)->address()});
  auto meta = c.Metadata("m");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->source_file(), "m/1/model.h5");
  for (const char* name : {"broken", "empty"}) {
    auto failed = c.Metadata(name);
    EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
    EXPECT_EQ(failed.status().message().find(repo_.string()), std::string::npos) << failed.status();
    EXPECT_NE(failed.status().message().find(name), std::string::npos) << failed.status();
  }
  const grpc::Status missing = LoadModel(**server, "no_such_dir");
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(missing.error_message().find(repo_.string()), std::string::npos)
      << missing.error_message();
}

// A KServe sequence keeps the version it started on when a newer one loads, and each response
// names the version that ran it.
TEST_F(RepositoryTest, KServeSequenceChunkAfterAVersionSwapReportsItsVersion) {
  auto server = ServerProcess::Start(repo_.string());
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials()));
  auto chunk = [&](bool start, bool sequence, inference::ModelInferResponse* resp) {
    inference::ModelInferRequest req;
    req.set_model_name("m");
    auto* in = req.add_inputs();
    in->set_name("waveform");
    in->set_datatype("FP32");
    for (int64_t d : {1, 5, 2}) in->add_shape(d);
    for (int i = 0; i < 10; ++i) in->mutable_contents()->add_fp32_contents(0.1f * i);
    if (sequence) {
      (*req.mutable_parameters())["sequence_id"].set_int64_param(7);
      (*req.mutable_parameters())["sequence_start"].set_bool_param(start);
    }
    grpc::ClientContext ctx;
    return stub->ModelInfer(&ctx, req, resp);
  };
  inference::ModelInferResponse resp;
  ASSERT_TRUE(chunk(true, true, &resp).ok());
  EXPECT_EQ(resp.model_version(), "1");
  AddVersion("m", 2);
  ASSERT_TRUE(LoadModel(**server, "m").ok());
  EXPECT_EQ(Versions(**server, "m"), std::vector<int64_t>{2});
  const grpc::Status s = chunk(false, true, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model_version(), "1");
  ASSERT_TRUE(chunk(false, false, &resp).ok());
  EXPECT_EQ(resp.model_version(), "2");
}

// A client that sends invalid UTF-8 in a string field makes protobuf log a line per request;
// at most one gets out per 10 s.
TEST_F(RepositoryTest, InvalidUtf8RequestsDoNotWriteALogLineEach) {
  const fs::path log = repo_.string() + ".log";
  auto server = ServerProcess::Start(repo_.string(), {}, {}, log.string());
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel((*server)->address(), grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  const google::protobuf::LogSilencer quiet;  // the client's own complaint, once per request
  for (int i = 0; i < 50; ++i) {
    inference::ModelInferRequest req;
    req.set_model_name(std::string("m\xff\xfe", 3));
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    EXPECT_FALSE(stub->ModelInfer(&ctx, req, &resp).ok());
  }
  client::RnnServeClient c({.server = (*server)->address()});
  EXPECT_TRUE(c.Metadata("m").ok());
  EXPECT_EQ((*server)->Stop(), 0);
  const std::string text = ReadFile(log);
  int lines = 0;
  for (size_t at = text.find("invalid UTF-8"); at != std::string::npos;
       at = text.find("invalid UTF-8", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1) << text;
  fs::remove(log);
}

}  // namespace
}  // namespace rnnserve::testing
