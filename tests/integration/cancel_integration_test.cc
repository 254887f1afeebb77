// Cancelled and expired work stops, against the real server (server/batching/abandon_watch.h,
// engine::Batch::stop): a long Predict whose deadline passes, or whose client cancels, while it
// runs stops computing, so that the request after it is not held behind it, gets Keras's answer,
// and the server's CPU time (utime + stime, what process_cpu_seconds_total reports) shows that
// the work stopped.
//
// long_rnn (tests/fixtures/cancel, made with Keras by make_fixtures.py there: SimpleRNN(256)
// over one feature, then Dense(1)) has no dynamic batching and one instance: requests run one
// after another on it. The full long request's cost is measured on this machine first, so that
// the bounds are shares of it, not times: the stopped request (stopped a twentieth of the way) and
// the next one together must cost less than a third of the full run's CPU, and the next one
// must wait less than a third of its wall time (on a build without cancellation it waits for
// all of the rest, and the CPU is all of the full run's).

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/npy.h"
#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

// Steps of the long request: seconds of CPU, about 100 MB of scratch.
constexpr int64_t kLongSteps = 100'000;

v1::PredictRequest PredictOf(const std::vector<float>& signal) {
  v1::PredictRequest req;
  req.mutable_model_spec()->set_name("long_rnn");
  v1::Tensor& t = (*req.mutable_inputs())["signal"];
  t.set_dtype(v1::TYPE_FP32);
  t.add_shape(1);
  t.add_shape(static_cast<int64_t>(signal.size()));
  t.add_shape(1);
  for (float v : signal) t.add_float_val(v);
  return req;
}

v1::PredictRequest LongRequest() {
  std::vector<float> signal(kLongSteps);
  for (int64_t i = 0; i < kLongSteps; ++i) signal[i] = std::sin(0.01f * static_cast<float>(i));
  return PredictOf(signal);
}

// The server's CPU time so far: user + system, from /proc (as process_cpu_seconds_total).
absl::Duration CpuTime(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // The fields after the command, which is in parentheses and may hold spaces.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::vector<std::string> f;
  for (std::string x; rest >> x;) f.push_back(x);
  if (f.size() < 13) return absl::ZeroDuration();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return absl::Seconds((std::stod(f[11]) + std::stod(f[12])) / ticks);
}

class CancelTest : public ServerSuite<> {
 protected:
  static void SetUpTestSuite() { StartServer(SourcePath("tests/fixtures/cancel")); }

  void SetUp() override {
    ServerSuite<>::SetUp();
    stub_ = v1::RnnServe::NewStub(
        grpc::CreateChannel(server()->address(), grpc::InsecureChannelCredentials()));
  }

  // Runs `req`: its status, its wall time, and its answer.
  grpc::Status Predict(const v1::PredictRequest& req, absl::Duration* took,
                       v1::PredictResponse* resp,
                       absl::Duration deadline = absl::InfiniteDuration()) {
    grpc::ClientContext ctx;
    if (deadline != absl::InfiniteDuration()) {
      ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(deadline));
    }
    const absl::Time start = absl::Now();
    const grpc::Status s = stub_->Predict(&ctx, req, resp);
    *took = absl::Now() - start;
    return s;
  }

  // The CPU and wall time of the long request run to its end (its second run: the first grows
  // the instance's scratch).
  void MeasureFullRun(const v1::PredictRequest& long_req) {
    v1::PredictResponse resp;
    ASSERT_TRUE(Predict(long_req, &full_wall_, &resp).ok());
    const absl::Duration before = CpuTime(server()->pid());
    ASSERT_TRUE(Predict(long_req, &full_wall_, &resp).ok());
    full_cpu_ = CpuTime(server()->pid()) - before;
    ASSERT_GT(full_cpu_, absl::ZeroDuration()) << "the long request cost no CPU time";
    std::cerr << "the long request of " << kLongSteps << " steps costs " << full_cpu_
              << " of CPU and " << full_wall_ << " run to its end\n";
  }

  // The request after the stopped one: Keras's answer (short_x.npy -> short_y.npy), within
  // a third of the full run's wall time.
  void ExpectNextRequestMatchesKeras(const char* stopped_how) {
    auto x = client::ReadNpy(SourcePath("tests/fixtures/cancel/short_x.npy"));
    auto y = client::ReadNpy(SourcePath("tests/fixtures/cancel/short_y.npy"));
    ASSERT_TRUE(x.ok() && y.ok());
    const std::vector<float> signal(x->values.begin(), x->values.end());
    absl::Duration took;
    v1::PredictResponse resp;
    const grpc::Status s = Predict(PredictOf(signal), &took, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const v1::Tensor& score = resp.outputs().at("score");
    ASSERT_EQ(score.float_val_size(), 1);
    EXPECT_NEAR(score.float_val(0), y->values[0], 1e-4 + 1e-4 * std::abs(y->values[0]));
    std::cerr << "the request after the " << stopped_how << " one took " << took << "\n";
    EXPECT_LT(took, full_wall_ / 3) << "the request after the " << stopped_how << " one waited "
                                    << took << "; the long request's full run takes " << full_wall_;
  }

  std::unique_ptr<v1::RnnServe::Stub> stub_;
  absl::Duration full_cpu_, full_wall_;
};

TEST_F(CancelTest, ExpiredRequestStopsComputingAndTheNextRequestIsNotHeldBehindIt) {
  const v1::PredictRequest long_req = LongRequest();
  MeasureFullRun(long_req);
  const absl::Duration cpu_before = CpuTime(server()->pid());
  absl::Duration took;
  v1::PredictResponse resp;
  // A twentieth of the full run: it expires while it runs.
  const grpc::Status expired = Predict(long_req, &took, &resp, full_wall_ / 20);
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << expired.error_message();
  ExpectNextRequestMatchesKeras("expired");
  const absl::Duration cpu = CpuTime(server()->pid()) - cpu_before;
  std::cerr << "the expired request and the next cost " << cpu << " of CPU\n";
  EXPECT_LT(cpu, full_cpu_ / 3) << "the expired request and the next cost " << cpu
                                << " of CPU; the long request's full run costs " << full_cpu_;
}

TEST_F(CancelTest, CancelledRequestStopsComputingAndTheNextRequestIsNotHeldBehindIt) {
  const v1::PredictRequest long_req = LongRequest();
  MeasureFullRun(long_req);
  const absl::Duration cpu_before = CpuTime(server()->pid());
  grpc::ClientContext ctx;
  v1::PredictResponse resp;
  grpc::Status cancelled;
  std::thread call([&] { cancelled = stub_->Predict(&ctx, long_req, &resp); });
  absl::SleepFor(full_wall_ / 20);  // it runs by then
  ctx.TryCancel();
  call.join();
  EXPECT_EQ(cancelled.error_code(), grpc::StatusCode::CANCELLED) << cancelled.error_message();
  ExpectNextRequestMatchesKeras("cancelled");
  const absl::Duration cpu = CpuTime(server()->pid()) - cpu_before;
  std::cerr << "the cancelled request and the next cost " << cpu << " of CPU\n";
  EXPECT_LT(cpu, full_cpu_ / 3) << "the cancelled request and the next cost " << cpu
                                << " of CPU; the long request's full run costs " << full_cpu_;
}

}  // namespace
}  // namespace rnnserve::testing
