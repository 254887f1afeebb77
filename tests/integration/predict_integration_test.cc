// The real rnnserve binary on a loopback port, called through the C++ client and through
// rnnserve-cli, against Keras's own predictions for the example model.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

bool Close(const client::NpyArray& got, const client::NpyArray& want, double rtol = 1e-5) {
  if (got.shape != want.shape) return false;
  for (size_t i = 0; i < got.values.size(); ++i) {
    if (std::fabs(got.values[i] - want.values[i]) > 1e-6 + rtol * std::fabs(want.values[i])) {
      return false;
    }
  }
  return true;
}

class ExampleServerTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() { StartServer(SourcePath("models/examples")); }
  client::RnnServeClient Client() {
    return client::RnnServeClient({.server = server()->address()});
  }
  std::map<std::string, client::NpyArray> GoodInput() {
    return {{"waveform", LoadNpy("tests/fixtures/example/input.npy")}};
  }
  absl::Status PredictStatus(const v1::PredictRequest& req) {
    auto stub = v1::RnnServe::NewStub(
        grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::PredictResponse resp;
    const grpc::Status s = stub->Predict(&ctx, req, &resp);
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  // A well-formed request for the example model, with a [B, T, F] float input.
  v1::PredictRequest Request(int64_t B, int64_t T, int64_t F) {
    v1::PredictRequest req;
    req.mutable_model_spec()->set_name("waveform_lstm");
    v1::Tensor& t = (*req.mutable_inputs())["waveform"];
    t.set_dtype(v1::TYPE_FP32);
    t.add_shape(B);
    t.add_shape(T);
    t.add_shape(F);
    for (int64_t i = 0; i < B * T * F; ++i) t.add_float_val(0.01f * static_cast<float>(i % 7));
    return req;
  }
  void ExpectGoodAnswer() {
    auto client = Client();
    auto resp = client.Predict("waveform_lstm", GoodInput(), {});
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_TRUE(Close(client::ToArray(resp->outputs().at("probabilities")),
                      LoadNpy("tests/fixtures/example/expected.npy")));
  }
};

TEST_F(ExampleServerTest, PredictMatchesKerasForMixedLengths) { ExpectGoodAnswer(); }

TEST_F(ExampleServerTest, PredictWithExplicitLengthsMatchesKeras) {
  auto client = Client();
  auto resp = client.Predict("waveform_lstm", GoodInput(), {40, 25, 12});
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_TRUE(Close(client::ToArray(resp->outputs().at("probabilities")),
                    LoadNpy("tests/fixtures/example/expected.npy")));
}

// Length 0 is an empty sequence (engine/lengths.h): its neighbours keep Keras's numbers and it
// answers as a row that the model's Masking layer masks at every step.
TEST_F(ExampleServerTest, ZeroLengthSequenceAnswersAsAFullyMaskedOne) {
  auto client = Client();
  auto resp = client.Predict("waveform_lstm", GoodInput(), {40, 0, 12});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const client::NpyArray got = client::ToArray(resp->outputs().at("probabilities"));  // [3, 3]
  client::NpyArray zeros{"<f4", {1, 40, 2}, std::vector<double>(80, 0.0)};
  auto masked = client.Predict("waveform_lstm", {{"waveform", zeros}}, {});
  ASSERT_TRUE(masked.ok()) << masked.status();
  const client::NpyArray want_masked = client::ToArray(masked->outputs().at("probabilities"));
  const client::NpyArray keras = LoadNpy("tests/fixtures/example/expected.npy");
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(got.values[k], keras.values[k], 1e-5) << "row 0, class " << k;
    EXPECT_NEAR(got.values[3 + k], want_masked.values[k], 1e-6) << "row 1, class " << k;
    EXPECT_NEAR(got.values[6 + k], keras.values[6 + k], 1e-5) << "row 2, class " << k;
  }
}

TEST_F(ExampleServerTest, CliPredictWritesKerasNumbersToNpz) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("rnnserve_cli_" + std::to_string(getpid()) + ".npz"))
                              .string();
  std::string log;
  const int rc = RunCommand(
      {RNNSERVE_CLI_BIN, "predict", "--server", server()->address(), "--model", "waveform_lstm",
       "--input", SourcePath("models/examples/waveform_lstm/sample_input.json"), "--output", out},
      &log);
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("probabilities: FP32 [3,3]"), std::string::npos) << log;
  auto arrays = client::ReadNpz(out);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  EXPECT_TRUE(Close(arrays->at("probabilities"), LoadNpy("tests/fixtures/example/expected.npy")));
  std::remove(out.c_str());
}

// An .npz of the inputs with the expected outputs beside them, as users keep them.
std::string InputsWithExpectedNpz() {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rnnserve_cli_in_" + std::to_string(getpid()) + ".npz"))
                               .string();
  std::map<std::string, std::string> files;
  for (const char* name : {"input", "expected"}) {
    const client::NpyArray a = LoadNpy(std::string("tests/fixtures/example/") + name + ".npy");
    files[name] = client::SerializeNpyFloat32(a.shape, {a.values.begin(), a.values.end()});
  }
  EXPECT_TRUE(client::WriteNpz(path, files).ok());
  return path;
}

TEST_F(ExampleServerTest, CliPredictPicksOneArrayOfAnNpz) {
  const std::string npz = InputsWithExpectedNpz();
  for (const std::string& spec : {"waveform=" + npz + ":input", npz + ":input"}) {
    std::string log;
    ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "predict", "--server", server()->address(), "--model",
                          "waveform_lstm", "--input", spec, "--lengths", "40,25,12", "--json"},
                         &log),
              0)
        << spec << ": " << log;
    const auto out = nlohmann::json::parse(log);
    const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
    for (int b = 0; b < 3; ++b) {
      for (int c = 0; c < 3; ++c) {
        EXPECT_NEAR(out["outputs"]["probabilities"]["data"][b][c].get<double>(),
                    want.values[b * 3 + c], 1e-5);
      }
    }
  }
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "predict", "--server", server()->address(), "--model",
                        "waveform_lstm", "--input", "waveform=" + npz},
                       &log),
            1);
  EXPECT_NE(log.find("holds 2 arrays (expected, input): pick one with waveform=" + npz + ":ARRAY"),
            std::string::npos)
      << log;
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "predict", "--server", server()->address(), "--model",
                        "waveform_lstm", "--input", npz + ":inputs"},
                       &log),
            1);
  EXPECT_NE(log.find("has no array 'inputs'; it holds: expected, input"), std::string::npos) << log;
  std::remove(npz.c_str());
}

TEST_F(ExampleServerTest, CliPredictWrongInputNameNamesTheModelsInputs) {
  const std::string npz = InputsWithExpectedNpz();
  // A wrong NAME=, and an .npz whose own array names are not the model's.
  for (const auto& [spec, name] : std::vector<std::pair<std::string, std::string>>{
           {"wave=" + SourcePath("tests/fixtures/example/input.npy"), "wave"}, {npz, "expected"}}) {
    std::string log;
    EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "predict", "--server", server()->address(), "--model",
                          "waveform_lstm", "--input", spec},
                         &log),
              1);
    EXPECT_NE(log.find("INVALID_ARGUMENT: model 'waveform_lstm' has no input '" + name +
                       "'; its inputs: waveform"),
              std::string::npos)
        << log;
    EXPECT_EQ(log.find("dtype"), std::string::npos) << log;
  }
  std::remove(npz.c_str());
}

TEST_F(ExampleServerTest, CliListAndMetadataDescribeTheModel) {
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "list", "--server", server()->address(), "--json"}, &log),
            0)
      << log;
  EXPECT_NE(log.find("\"name\":\"waveform_lstm\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"state\":\"READY\""), std::string::npos) << log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "metadata", "--server", server()->address(), "--model",
                        "waveform_lstm", "--json"},
                       &log),
            0)
      << log;
  EXPECT_NE(log.find("\"waveform\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"engine\": \"cpu\""), std::string::npos) << log;
}

TEST_F(ExampleServerTest, UnknownModelIsNotFound) {
  v1::PredictRequest req = Request(1, 5, 2);
  req.mutable_model_spec()->set_name("no_such_model");
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("no_such_model"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, WrongFeatureSizeNamesInputAndExpectedShape) {
  const absl::Status s = PredictStatus(Request(2, 5, 3));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("input 'waveform'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("expected [?,?,2]"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, WrongDtypeIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  v1::Tensor& t = (*req.mutable_inputs())["waveform"];
  t.clear_float_val();
  t.set_dtype(v1::TYPE_INT64);
  for (int i = 0; i < 8; ++i) t.add_int64_val(i);
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("expected TYPE_FP32"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, ValueCountMismatchIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  (*req.mutable_inputs())["waveform"].mutable_float_val()->RemoveLast();
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("needs 8 values, got 7"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, LengthPastTheTimeAxisIsInvalidArgument) {
  v1::PredictRequest req = Request(2, 4, 2);
  req.add_lengths(4);
  req.add_lengths(5);
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("lengths[1] = 5"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, UnexpectedExtraInputIsInvalidArgument) {
  v1::PredictRequest req = Request(1, 4, 2);
  (*req.mutable_inputs())["extra"] = req.inputs().at("waveform");
  const absl::Status s = PredictStatus(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("unexpected input 'extra'"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, EmptyBatchIsInvalidArgument) {
  const absl::Status s = PredictStatus(Request(0, 4, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("empty batch"), std::string::npos) << s;
}

TEST_F(ExampleServerTest, BatchLargerThanMaxBatchSizeIsSplitAndJoined) {
  // max_batch_size is 64: 150 sequences run as three engine calls, each row as if alone.
  auto client = Client();
  const client::NpyArray one = LoadNpy("tests/fixtures/example/input.npy");
  client::NpyArray big = one;
  big.shape[0] = 150;
  big.values.clear();
  for (int i = 0; i < 50; ++i)
    big.values.insert(big.values.end(), one.values.begin(), one.values.end());
  auto resp = client.Predict("waveform_lstm", {{"waveform", big}}, {});
  ASSERT_TRUE(resp.ok()) << resp.status();
  const client::NpyArray got = client::ToArray(resp->outputs().at("probabilities"));
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  ASSERT_EQ(got.shape, (std::vector<int64_t>{150, 3}));
  for (int i = 0; i < 150; ++i) {
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(got.values[i * 3 + c], want.values[(i % 3) * 3 + c], 1e-5) << "row " << i;
    }
  }
}

TEST_F(ExampleServerTest, ServerKeepsServingAfterBadRequests) {
  PredictStatus(Request(0, 4, 2)).IgnoreError();
  PredictStatus(Request(2, 5, 3)).IgnoreError();
  PredictStatus(Request(1, 0, 2)).IgnoreError();
  ASSERT_TRUE(server()->Alive());
  ExpectGoodAnswer();
}

TEST_F(ExampleServerTest, ReturnedStatesFedBackAsInitialStatesContinueTheSequence) {
  // Sequence 0 (40 steps) in two Predict calls: the second starts from the first's states.
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  auto half = [&](int64_t t0) {
    v1::Tensor t;
    t.set_dtype(v1::TYPE_FP32);
    t.add_shape(1);
    t.add_shape(20);
    t.add_shape(2);
    for (int64_t i = t0 * 2; i < (t0 + 20) * 2; ++i) t.add_float_val(x.values[i]);
    return t;
  };
  auto stub = v1::RnnServe::NewStub(
      grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  v1::PredictRequest first;
  first.mutable_model_spec()->set_name("waveform_lstm");
  (*first.mutable_inputs())["waveform"] = half(0);
  first.set_return_states(true);
  v1::PredictResponse r1;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->Predict(&ctx, first, &r1).ok());
  }
  ASSERT_EQ(r1.final_states().size(), 2u);
  ASSERT_EQ(r1.final_states().at("lstm_1").states_size(), 2);  // h, c
  EXPECT_EQ(r1.final_states().at("lstm_1").states(0).shape(1), 32);
  v1::PredictRequest second;
  second.mutable_model_spec()->set_name("waveform_lstm");
  (*second.mutable_inputs())["waveform"] = half(20);
  *second.mutable_initial_states() = r1.final_states();
  v1::PredictResponse r2;
  {
    grpc::ClientContext ctx;
    const grpc::Status s = stub->Predict(&ctx, second, &r2);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const auto& got = r2.outputs().at("probabilities").float_val();
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want.values[c], 1e-5);
  // A layer that is not recurrent is refused by name.
  (*second.mutable_initial_states())["probabilities"] = r1.final_states().at("lstm_1");
  grpc::ClientContext ctx;
  const grpc::Status bad = stub->Predict(&ctx, second, &r2);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("'probabilities' is not a recurrent layer"),
            std::string::npos);
}

TEST_F(ExampleServerTest, CliEvaluateMatchesTheLossOfKerasPredictions) {
  std::string log;
  const std::string dir = SourcePath("tests/fixtures/example/");
  const std::string labels =
      (std::filesystem::temp_directory_path() / ("labels_" + std::to_string(getpid()) + ".json"))
          .string();
  std::ofstream(labels) << "[0, 1, 2]";
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "evaluate", "--server", server()->address(), "--model",
                        "waveform_lstm", "--input", dir + "input.npy", "--target", labels,
                        "--batch-size", "2", "--json"},
                       &log),
            0)
      << log;
  const auto out = nlohmann::json::parse(log);
  const client::NpyArray p = LoadNpy("tests/fixtures/example/expected.npy");
  const double want = -(std::log(p.values[0]) + std::log(p.values[4]) + std::log(p.values[8])) / 3;
  EXPECT_NEAR(out["loss"].get<double>(), want, 1e-5 * want);
  EXPECT_EQ(out["samples"].get<int>(), 3);
  EXPECT_EQ(out["loss_name"].get<std::string>(), "sparse_categorical_crossentropy");
  std::remove(labels.c_str());
}

TEST_F(ExampleServerTest, CliStreamChunksEqualKeras) {
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "stream", "--server", server()->address(), "--model",
                        "waveform_lstm", "--input", SourcePath("tests/fixtures/example/input.npy"),
                        "--chunk-steps", "6", "--lengths", "40,25,12", "--json"},
                       &log),
            0)
      << log;
  const auto out = nlohmann::json::parse(log);
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  ASSERT_EQ(out.size(), 3u);
  for (int b = 0; b < 3; ++b) {
    const auto& row = out[b]["outputs"]["probabilities"]["data"][0];
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(row[c].get<double>(), want.values[b * 3 + c], 1e-5);
  }
}

TEST_F(ExampleServerTest, CliLoadUnloadAndServer) {
  std::string log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "server", "--server", server()->address()}, &log), 0)
      << log;
  EXPECT_NE(log.find("rnnserve"), std::string::npos) << log;
  ASSERT_EQ(RunCommand({RNNSERVE_CLI_BIN, "load", "--server", server()->address(), "--model",
                        "waveform_lstm"},
                       &log),
            0)
      << log;
  EXPECT_NE(log.find("waveform_lstm READY versions [1]"), std::string::npos) << log;
  EXPECT_EQ(RunCommand({RNNSERVE_CLI_BIN, "unload", "--server", server()->address(), "--model",
                        "nothing_here"},
                       &log),
            1);
  EXPECT_NE(log.find("NOT_FOUND"), std::string::npos) << log;
}

TEST(Inspect, DescribesTheExampleWithoutAServer) {
  std::string log;
  ASSERT_EQ(
      RunCommand({RNNSERVE_BIN, "inspect", SourcePath("models/examples/waveform_lstm/1/model.h5")},
                 &log),
      0)
      << log;
  EXPECT_NE(log.find("LSTM in=2 units=32 forward act=sigmoid/tanh/tanh return_sequences"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("gpu: cuDNN"), std::string::npos) << log;
  EXPECT_NE(log.find("Dense 16->3 softmax"), std::string::npos) << log;
}

TEST(Inspect, DescribesTheFiveRealKerasFiles) {
  const std::string dir = SharedModelsDir();
  if (dir.empty()) GTEST_SKIP() << "../shared/models/keras-real is absent";
  struct Want {
    const char* file;
    std::vector<std::string> lines;
  };
  const std::vector<Want> wants = {
      {"aind_nlp_gru_timedistributed.h5",
       {"GRU in=1 units=64 forward act=hard_sigmoid(0.2x+0.5)/tanh reset_after=0",
        "not cuDNN: GRU activations hard_sigmoid", "Dense 64->344 softmax"}},
      {"arabic_sentiment_lstm.h5",
       {"LSTM in=200 units=100 forward act=hard_sigmoid(0.2x+0.5)/tanh/tanh",
        "Dense 100->3 sigmoid"}},
      {"elec_gru3_reset_after.h5",
       {"GRU in=105 units=64 forward act=sigmoid/tanh reset_after=1", "gpu: cuDNN"}},
      {"k3_sensor_bilstm.h5",
       {"LSTM in=1 units=64 bidirectional merge=concat", "Dense 16->1 sigmoid",
        "identity at inference"}},
      {"k3_weather_lstm2.keras",
       {"LSTM in=20 units=128 forward act=sigmoid/tanh/tanh return_sequences",
        "LSTM in=128 units=64", "Dense 32->1 linear"}},
  };
  for (const Want& w : wants) {
    std::string log;
    ASSERT_EQ(RunCommand({RNNSERVE_BIN, "inspect", dir + "/" + w.file}, &log), 0) << log;
    for (const std::string& line : w.lines) {
      EXPECT_NE(log.find(line), std::string::npos) << w.file << " lacks '" << line << "':\n" << log;
    }
  }
}

TEST(ServerLifecycle, SigtermShutsDownCleanly) {
  auto s = ServerProcess::Start(SourcePath("models/examples"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->Stop(), 0);
}

TEST(ServerLifecycle, BadFlagIsRejectedWithUsage) {
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "--port", "notaport"}, &log), 2);
  EXPECT_NE(log.find("--port"), std::string::npos) << log;
  EXPECT_NE(log.find("notaport"), std::string::npos) << log;
}

TEST(ServerLifecycle, OnePollingThreadStillServesConcurrentClients) {
  auto s = ServerProcess::Start(SourcePath("models/examples"),
                                {"--grpc-min-pollers", "1", "--grpc-max-pollers", "1"});
  ASSERT_TRUE(s.ok()) << s.status();
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  std::vector<std::thread> clients;
  std::atomic<int> good{0};
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      client::RnnServeClient client({.server = (*s)->address()});
      for (int r = 0; r < 4; ++r) {
        auto resp = client.Predict("waveform_lstm",
                                   {{"waveform", LoadNpy("tests/fixtures/example/input.npy")}}, {});
        if (resp.ok() && Close(client::ToArray(resp->outputs().at("probabilities")), want)) {
          ++good;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(good.load(), 32);
  EXPECT_EQ((*s)->Stop(), 0);
}

TEST(ServerLifecycle, PollerFlagsOutOfOrderAreRejected) {
  std::string log;
  EXPECT_EQ(RunCommand({RNNSERVE_BIN, "--grpc-min-pollers", "8", "--grpc-max-pollers", "2"}, &log),
            2);
  EXPECT_NE(log.find("--grpc-min-pollers (8) must not exceed --grpc-max-pollers (2)"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace rnnserve::testing
