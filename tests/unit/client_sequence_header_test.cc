// The C++ client names the sequence of a stream in the x-sequence-id header, where a proxy in
// front of several replicas can hash it (docs/scale-out.md): a stand-in server records it.

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "client/client.h"
#include "gtest/gtest.h"

namespace rnnserve::client {
namespace {

class StandIn final : public v1::RnnServe::Service {
 public:
  grpc::Status ModelMetadata(grpc::ServerContext*, const v1::ModelMetadataRequest*,
                             v1::ModelMetadataResponse* resp) override {
    auto* in = resp->add_inputs();
    in->set_name("in");
    in->set_dtype(v1::TYPE_FP32);
    return grpc::Status::OK;
  }
  grpc::Status StreamPredict(grpc::ServerContext* context,
                             grpc::ServerReaderWriter<v1::StreamPredictResponse,
                                                      v1::StreamPredictRequest>* stream) override {
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [key, value] : context->client_metadata()) {
        if (std::string_view(key.data(), key.size()) == kSequenceIdHeader)
          header_ = std::string(value.data(), value.size());
      }
    }
    v1::StreamPredictRequest req;
    while (stream->Read(&req)) {
      v1::StreamPredictResponse resp;
      resp.set_sequence_id(req.sequence_id());
      stream->Write(resp);
    }
    return grpc::Status::OK;
  }
  std::string header() {
    absl::MutexLock lock(&mu_);
    return header_;
  }

 private:
  absl::Mutex mu_;
  std::string header_;
};

TEST(ClientSequenceHeaderTest, StreamSendsItsFirstSequenceIdInXSequenceId) {
  StandIn service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  RnnServeClient client({.server = "127.0.0.1:" + std::to_string(port)});
  NpyArray x;
  x.descr = "<f4";
  x.shape = {2, 3, 1};
  x.values.assign(6, 0.5);
  const absl::Status s = client.StreamSequences(
      "m", x, 2, {}, 4242, [](int64_t, int64_t, const v1::StreamPredictResponse&) {});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(service.header(), "4242");
  server->Shutdown();
}

}  // namespace
}  // namespace rnnserve::client
