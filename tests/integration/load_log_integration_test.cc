// What a user reads about a model's load: the server's log and the model's metadata say why
// no GPU runs it once (not per layer), and the dynamic batcher's line says what it honours.

#include <grpcpp/grpcpp.h>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

namespace fs = std::filesystem;

// Two copies of one Keras model: "plain" (KIND_AUTO, no batching) and "batched", whose queue
// delay is unused because it does not ask to wait when idle.
constexpr char kBatched[] = R"pb(
  name: "batched"
  max_batch_size: 8
  dynamic_batching { max_queue_delay_microseconds: 500 }
)pb";

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class LoadLogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repo_ =
        new fs::path(fs::temp_directory_path() / ("rnnserve_loadlog_" + std::to_string(getpid())));
    for (const char* name : {"plain", "batched"}) {
      fs::create_directories(*repo_ / name / "1");
      fs::copy_file(SourcePath("tests/fixtures/evaluate/saturated_softmax_categorical/1/model.h5"),
                    *repo_ / name / "1/model.h5", fs::copy_options::overwrite_existing);
    }
    std::ofstream(*repo_ / "batched" / "config.pbtxt") << kBatched;
    auto started = ServerProcess::Start(repo_->string(), {"--log-level", "info"}, {},
                                        (*repo_ / "server.log").string());
    if (started.ok()) {
      server_ = started->release();
    } else {
      start_error_ = new std::string(started.status().message());
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
    std::error_code ec;
    fs::remove_all(*repo_, ec);
    delete repo_;
  }
  static std::string Log() {
    std::ifstream in(*repo_ / "server.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "rnnserve did not start: " << *start_error_;
  }
  std::unique_ptr<v1::RnnServe::Stub> Stub() {
    return v1::RnnServe::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  // Why the server has no GPU ("" where it has one).
  std::string WhyNoGpu() {
    grpc::ClientContext ctx;
    v1::ServerMetadataResponse resp;
    EXPECT_TRUE(Stub()->ServerMetadata(&ctx, v1::ServerMetadataRequest(), &resp).ok());
    return resp.gpu_available() ? "" : resp.gpu_reason();
  }

  static fs::path* repo_;
  static ServerProcess* server_;
  static std::string* start_error_;
};
fs::path* LoadLogTest::repo_ = nullptr;
ServerProcess* LoadLogTest::server_ = nullptr;
std::string* LoadLogTest::start_error_ = nullptr;

TEST_F(LoadLogTest, WhyNoGpuIsSaidOnceInTheLogAndPerInstanceNotPerLayer) {
  const std::string why = WhyNoGpu();
  if (why.empty()) GTEST_SKIP() << "a GPU is visible: KIND_AUTO instances run on it";
  // Plain words first, then what CUDA said (a CUDA build), or that the build has none.
  EXPECT_TRUE(why.rfind("no CUDA device", 0) == 0 ||
              why.rfind("this build has no CUDA engine", 0) == 0)
      << why;
  EXPECT_EQ(why.find("no GPU:"), std::string::npos) << why;
  // Two models loaded on the CPU: the log says why once.
  EXPECT_EQ(Count(Log(), why), 1) << Log();

  v1::ModelMetadataRequest req;
  req.mutable_model_spec()->set_name("plain");
  v1::ModelMetadataResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(Stub()->ModelMetadata(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.instances_size(), 1);
  const v1::InstanceInfo& instance = resp.instances(0);
  EXPECT_EQ(instance.engine(), "cpu");
  EXPECT_NE(instance.reason().find("KIND_AUTO without a usable GPU: " + why), std::string::npos)
      << instance.reason();
  ASSERT_GE(instance.layers_size(), 2);  // LSTM, Dense
  for (const v1::LayerPlacement& layer : instance.layers()) {
    EXPECT_EQ(layer.reason().find(why), std::string::npos)
        << layer.layer() << ": " << layer.reason();
    EXPECT_EQ(layer.reason().find("KIND_AUTO"), std::string::npos) << layer.layer();
    EXPECT_NE(layer.reason().find("CPU engine"), std::string::npos) << layer.layer();
  }
}

TEST_F(LoadLogTest, BatcherLineSaysAnUnusedQueueDelayIsUnused) {
  const std::string log = Log();
  EXPECT_EQ(log.find("500 us queue delay"), std::string::npos) << log;
  EXPECT_NE(log.find("model batched v1: dynamic batching up to 8 sequences, work-conserving"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("max_queue_delay_microseconds and preferred_batch_size are unused without "
                     "wait_for_delay_when_idle"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace rnnserve::testing
