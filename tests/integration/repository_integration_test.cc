// The model repository against the real server: LoadModel/UnloadModel, polling, and a reload
// under concurrent load that fails no request.

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "client/client.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

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
  auto server = ServerProcess::Start(repo_.string());
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
  auto server = ServerProcess::Start(repo_.string(), {"--model-check-seconds", "2"});
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

}  // namespace
}  // namespace rnnserve::testing
