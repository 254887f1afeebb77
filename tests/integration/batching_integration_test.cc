// Many concurrent clients against the real rnnserve binary with dynamic batching on: each
// client gets Keras's numbers for exactly its own rows, whatever batches they shared.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kConfig[] = R"pb(
  name: "waveform_lstm"
  platform: "keras_h5"
  max_batch_size: 8
  input {
    name: "waveform"
    data_type: TYPE_FP32
    dims: [ -1, 2 ]
  }
  output {
    name: "probabilities"
    data_type: TYPE_FP32
    dims: [ 3 ]
  }
  instance_group { kind: KIND_CPU count: 2 }
  dynamic_batching {
    max_queue_delay_microseconds: 2000
    preferred_batch_size: [ 4 ]
  }
)pb";

// A model repository holding the example model with kConfig, removed at the end.
class BatchingServerTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    repo_ =
        new fs::path(fs::temp_directory_path() / ("rnnserve_batching_" + std::to_string(getpid())));
    const fs::path model = *repo_ / "waveform_lstm";
    fs::create_directories(model / "1");
    fs::copy_file(SourcePath("models/examples/waveform_lstm/1/model.h5"), model / "1/model.h5",
                  fs::copy_options::overwrite_existing);
    std::ofstream(model / "config.pbtxt") << kConfig;
    StartServer(repo_->string());
  }
  static void TearDownTestSuite() {
    ServerSuite::TearDownTestSuite();
    std::error_code ec;
    fs::remove_all(*repo_, ec);
    delete repo_;
  }

  static fs::path* repo_;
};
fs::path* BatchingServerTest::repo_ = nullptr;

// Rows of the Keras fixture, cut to the longest of their lengths (the rest is zero padding
// that the model's Masking layer ignores).
struct Case {
  std::vector<int> rows;
  bool give_lengths = false;
};

client::NpyArray CaseInput(const Case& c, std::vector<int32_t>* lengths) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");      // [3, 40, 2]
  const client::NpyArray len = LoadNpy("tests/fixtures/example/lengths.npy");  // [3]
  int64_t T = 0;
  for (int r : c.rows) T = std::max<int64_t>(T, static_cast<int64_t>(len.values[r]));
  client::NpyArray in;
  in.descr = "<f4";
  in.shape = {static_cast<int64_t>(c.rows.size()), T, 2};
  for (int r : c.rows) {
    in.values.insert(in.values.end(), x.values.begin() + r * 80, x.values.begin() + r * 80 + T * 2);
    if (c.give_lengths) lengths->push_back(static_cast<int32_t>(len.values[r]));
  }
  return in;
}

std::string CheckAnswer(const client::NpyArray& got, const Case& c) {
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");  // [3, 3]
  if (got.shape != std::vector<int64_t>{static_cast<int64_t>(c.rows.size()), 3}) {
    return "wrong output shape";
  }
  for (size_t b = 0; b < c.rows.size(); ++b) {
    for (int k = 0; k < 3; ++k) {
      const double w = want.values[c.rows[b] * 3 + k];
      if (std::fabs(got.values[b * 3 + k] - w) > 1e-6 + 1e-5 * std::fabs(w)) {
        return "row " + std::to_string(b) + " class " + std::to_string(k) + ": " +
               std::to_string(got.values[b * 3 + k]) + ", Keras " + std::to_string(w);
      }
    }
  }
  return "";
}

TEST_F(BatchingServerTest, ManyConcurrentClientsEachGetTheirOwnKerasAnswer) {
  const std::vector<Case> cases = {
      {{0}},
      {{1}},
      {{2}},
      {{2, 0}},
      {{1, 2}, true},
      {{0, 1, 2}},
      {{2, 1, 0}, true},
      {{2, 2}},
      {{1, 0, 2, 1, 0, 2, 2, 1, 0, 1, 2}},
  };
  constexpr int kClients = 32;
  constexpr int kRequestsPerClient = 6;
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      client::RnnServeClient client({.server = server()->address()});
      for (int k = 0; k < kRequestsPerClient && errors[i].empty(); ++k) {
        const Case& c = cases[(i + k) % cases.size()];
        std::vector<int32_t> lengths;
        const client::NpyArray in = CaseInput(c, &lengths);
        auto resp = client.Predict("waveform_lstm", {{"waveform", in}}, lengths);
        if (!resp.ok()) {
          errors[i] = std::string(resp.status().message());
          continue;
        }
        errors[i] = CheckAnswer(client::ToArray(resp->outputs().at("probabilities")), c);
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(errors[i], "") << "client " << i;
  EXPECT_TRUE(server()->Alive());
}

TEST_F(BatchingServerTest, BadRequestAmongGoodOnesFailsAloneAndTheServerKeepsServing) {
  std::atomic<int> good_ok = 0;
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      client::RnnServeClient client({.server = server()->address()});
      std::vector<int32_t> lengths;
      const Case c{{0, 1, 2}};
      auto resp = client.Predict("waveform_lstm", {{"waveform", CaseInput(c, &lengths)}}, {});
      if (resp.ok() &&
          CheckAnswer(client::ToArray(resp->outputs().at("probabilities")), c).empty()) {
        ++good_ok;
      }
    });
  }
  client::RnnServeClient client({.server = server()->address()});
  std::vector<int32_t> unused;
  client::NpyArray bad = CaseInput({{0}}, &unused);
  bad.shape[2] = 1;  // wrong feature size: rejected at the edge with the expected shape
  bad.shape[1] *= 2;
  auto resp = client.Predict("waveform_lstm", {{"waveform", bad}}, {});
  EXPECT_EQ(resp.status().code(), absl::StatusCode::kInvalidArgument) << resp.status();
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(good_ok.load(), 8);
}

TEST_F(BatchingServerTest, SigtermWithBatchingOnShutsDownCleanly) {
  auto s = ServerProcess::Start(repo_->string());
  ASSERT_TRUE(s.ok()) << s.status();
  {
    client::RnnServeClient client({.server = (*s)->address()});
    std::vector<int32_t> lengths;
    const Case c{{2, 0}};
    auto resp = client.Predict("waveform_lstm", {{"waveform", CaseInput(c, &lengths)}}, {});
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_EQ(CheckAnswer(client::ToArray(resp->outputs().at("probabilities")), c), "");
  }
  EXPECT_EQ((*s)->Stop(), 0);
}

}  // namespace
}  // namespace rnnserve::testing
