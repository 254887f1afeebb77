// The example model served by the real rnnserve binary with step-level (cellular) batching:
// Predict (masked padding and explicit lengths), KServe ModelInfer, and many clients whose
// sequences join and leave the running batch all get Keras's numbers; metadata names the
// scheduler; /metrics has the cellular series.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "inference/grpc_service.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

// A repository holding the example model as "waveform_cellular", batched step by step in
// chunks of 4 steps over 8 slots.
std::string CellularRepository() {
  const fs::path repo =
      fs::temp_directory_path() / ("rnnserve_cellular_" + std::to_string(getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo / "waveform_cellular" / "1");
  fs::copy_file(SourcePath("models/examples/waveform_lstm/1/model.h5"),
                repo / "waveform_cellular" / "1" / "model.h5");
  std::ofstream(repo / "waveform_cellular" / "config.pbtxt")
      << "name: \"waveform_cellular\"\nplatform: \"keras_h5\"\nmax_batch_size: 8\n"
         "input { name: \"waveform\" data_type: TYPE_FP32 dims: [ -1, 2 ] }\n"
         "output { name: \"probabilities\" data_type: TYPE_FP32 dims: [ 3 ] }\n"
         "instance_group { kind: KIND_CPU count: 1 }\n"
         "cellular_batching { max_active_sequences: 8 chunk_steps: 4 }\n";
  return repo.string();
}

class CellularServingTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() {
    metrics_port_ = FreeLoopbackPort();
    StartServer(CellularRepository(), {"--metrics-port", std::to_string(metrics_port_)});
  }
  client::RnnServeClient Client() {
    return client::RnnServeClient({.server = server()->address()});
  }
  static ::testing::AssertionResult Close(const client::NpyArray& got,
                                          const client::NpyArray& want) {
    return AllClose(
        engine::Tensor::Float(got.shape, std::vector<float>(got.values.begin(), got.values.end())),
        want);
  }
  static int metrics_port_;
};
int CellularServingTest::metrics_port_ = 0;

TEST_F(CellularServingTest, MetadataSaysCellular) {
  auto meta = Client().Metadata("waveform_cellular");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->scheduler(), "cellular");
  EXPECT_EQ(meta->scheduler_reason(), "");
}

TEST_F(CellularServingTest, PredictWithMaskedPaddingAndWithLengthsMatchesKeras) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  for (const std::vector<int32_t>& lengths : {std::vector<int32_t>{}, {40, 25, 12}}) {
    auto resp = Client().Predict("waveform_cellular", {{"waveform", x}}, lengths);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_TRUE(Close(client::ToArray(resp->outputs().at("probabilities")), want))
        << lengths.size() << " lengths";
  }
}

TEST_F(CellularServingTest, ManyClientsJoiningTheRunningBatchEachGetKerasNumbers) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");  // [3, 40, 2]
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  const int64_t T = x.shape[1], F = x.shape[2], C = want.shape[1];
  constexpr int kClients = 24;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const int64_t row = i % 3;
      client::NpyArray one{"<f4",
                           {1, T, F},
                           std::vector<double>(x.values.begin() + row * T * F,
                                               x.values.begin() + (row + 1) * T * F)};
      auto resp = Client().Predict("waveform_cellular", {{"waveform", one}}, {});
      if (!resp.ok()) {
        failures[i] = std::string(resp.status().message());
        return;
      }
      client::NpyArray expected{
          "<f4",
          {1, C},
          std::vector<double>(want.values.begin() + row * C, want.values.begin() + (row + 1) * C)};
      const client::NpyArray got = client::ToArray(resp->outputs().at("probabilities"));
      if (const ::testing::AssertionResult close = Close(got, expected); !close) {
        failures[i] = close.message();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(failures[i], "") << "client " << i;
}

TEST_F(CellularServingTest, KServeModelInferMatchesKeras) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  inference::ModelInferRequest req;
  req.set_model_name("waveform_cellular");
  auto* in = req.add_inputs();
  in->set_name("waveform");
  in->set_datatype("FP32");
  for (int64_t d : x.shape) in->add_shape(d);
  std::vector<float> v(x.values.begin(), x.values.end());
  req.add_raw_input_contents()->assign(reinterpret_cast<const char*>(v.data()),
                                       v.size() * sizeof(float));
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  inference::ModelInferResponse resp;
  const grpc::Status s = stub->ModelInfer(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(resp.raw_output_contents_size(), 1);
  const std::string& raw = resp.raw_output_contents(0);
  std::vector<float> got(raw.size() / sizeof(float));
  std::memcpy(got.data(), raw.data(), raw.size());
  EXPECT_TRUE(
      AllClose(engine::Tensor::Float({3, 3}, got), LoadNpy("tests/fixtures/example/expected.npy")));
}

TEST_F(CellularServingTest, MetricsHaveTheCellularSeries) {
  ASSERT_TRUE(Client()
                  .Predict("waveform_cellular",
                           {{"waveform", LoadNpy("tests/fixtures/example/input.npy")}}, {})
                  .ok());
  std::string body;
  ASSERT_EQ(
      RunCommand({"curl", "-s", "http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"},
                 &body),
      0)
      << body;
  for (const char* series :
       {"rnnserve_cellular_chunk_steps_bucket{model=\"waveform_cellular\"",
        "rnnserve_cellular_slot_utilization_count{model=\"waveform_cellular\"",
        "rnnserve_time_to_first_step_seconds_count{model=\"waveform_cellular\"",
        "rnnserve_cellular_active_slots{model=\"waveform_cellular\"",
        "rnnserve_batch_size_count{model=\"waveform_cellular\""}) {
    EXPECT_NE(body.find(series), std::string::npos) << series;
  }
  // The request is over: no slot is in use. (The gauge is set just after the answer is sent, so
  // a scrape may come first: read again, for up to 5 s.)
  const std::string idle =
      "rnnserve_cellular_active_slots{model=\"waveform_cellular\",version=\"1\"} 0\n";
  for (int i = 0; i < 50 && body.find(idle) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RunCommand({"curl", "-s", "http://127.0.0.1:" + std::to_string(metrics_port_) + "/metrics"},
               &body);
  }
  EXPECT_NE(body.find(idle), std::string::npos) << body;
}

}  // namespace
}  // namespace rnnserve::testing
