// StreamPredict against the real server: chunked outputs equal the whole sequence's.

#include <grpcpp/grpcpp.h>

#include "client/client.h"
#include "gtest/gtest.h"
#include "rnnserve/v1/rnnserve.grpc.pb.h"
#include "tests/integration/server_process.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using Stream = grpc::ClientReaderWriter<v1::StreamPredictRequest, v1::StreamPredictResponse>;

// Rows [t0, t1) of sequence b of a [B, T, F] array, as a [1, t1 - t0, F] tensor.
v1::Tensor Steps(const client::NpyArray& x, int64_t b, int64_t t0, int64_t t1) {
  const int64_t T = x.shape[1], F = x.shape[2];
  v1::Tensor t;
  t.set_dtype(v1::TYPE_FP32);
  t.add_shape(1);
  t.add_shape(t1 - t0);
  t.add_shape(F);
  for (int64_t i = (b * T + t0) * F; i < (b * T + t1) * F; ++i) t.add_float_val(x.values[i]);
  return t;
}

v1::StreamPredictResponse Send(Stream* stream, const std::string& model, uint64_t id, bool start,
                               bool end, const v1::Tensor& chunk) {
  v1::StreamPredictRequest req;
  req.mutable_model_spec()->set_name(model);
  req.set_sequence_id(id);
  req.set_start(start);
  req.set_end(end);
  (*req.mutable_inputs())["in"] = chunk;
  EXPECT_TRUE(stream->Write(req));
  v1::StreamPredictResponse resp;
  EXPECT_TRUE(stream->Read(&resp));
  return resp;
}

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ServerProcess::Start(SourcePath("models/examples"));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    stub_ = v1::RnnServe::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<v1::RnnServe::Stub> stub_;
};

TEST_F(StreamTest, ChunkedSequencesEqualKerasOnTheWholeSequence) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  const client::NpyArray want = LoadNpy("tests/fixtures/example/expected.npy");
  const std::vector<int64_t> lengths = {40, 25, 12};
  grpc::ClientContext ctx;
  auto stream = stub_->StreamPredict(&ctx);
  // Three sequences interleaved on one stream, in chunks of 7 steps.
  std::vector<v1::StreamPredictResponse> last(3);
  for (int64_t t0 = 0; t0 < 40; t0 += 7) {
    for (int b = 0; b < 3; ++b) {
      if (t0 >= lengths[b]) continue;
      const int64_t t1 = std::min(t0 + 7, lengths[b]);
      last[b] = Send(stream.get(), "waveform_lstm", 100 + b, t0 == 0, t1 == lengths[b],
                     Steps(x, b, t0, t1));
      ASSERT_EQ(last[b].error_code(), 0) << last[b].error_message();
      EXPECT_EQ(last[b].sequence_id(), 100u + b);
    }
  }
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  for (int b = 0; b < 3; ++b) {
    const client::NpyArray got = client::ToArray(last[b].outputs().at("probabilities"));
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(got.values[c], want.values[b * 3 + c],
                  1e-5 + 1e-5 * std::fabs(want.values[b * 3 + c]))
          << "sequence " << b << " class " << c;
    }
  }
}

TEST_F(StreamTest, ChunkErrorsAreReportedAndTheStreamGoesOn) {
  const client::NpyArray x = LoadNpy("tests/fixtures/example/input.npy");
  grpc::ClientContext ctx;
  auto stream = stub_->StreamPredict(&ctx);
  auto r = Send(stream.get(), "waveform_lstm", 5, false, false, Steps(x, 0, 0, 4));
  EXPECT_EQ(r.error_code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  EXPECT_NE(r.error_message().find("not live"), std::string::npos) << r.error_message();
  r = Send(stream.get(), "no_such_model", 5, true, false, Steps(x, 0, 0, 4));
  EXPECT_EQ(r.error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  r = Send(stream.get(), "waveform_lstm", 5, true, false, Steps(x, 0, 0, 4));
  EXPECT_EQ(r.error_code(), 0) << r.error_message();
  v1::Tensor bad = Steps(x, 0, 4, 8);
  bad.set_shape(2, 3);
  bad.mutable_float_val()->Truncate(12);
  r = Send(stream.get(), "waveform_lstm", 5, false, false, bad);
  EXPECT_EQ(r.error_code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  r = Send(stream.get(), "waveform_lstm", 5, false, true, Steps(x, 0, 4, 8));
  EXPECT_EQ(r.error_code(), 0) << r.error_message();
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace rnnserve::testing
