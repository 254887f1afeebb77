// The request path's floor: a KServe v2 server with no model behind it, so that perf_analyzer
// measures what gRPC, protobuf and the threads cost a request on this machine, on each of the
// threading designs a server can use. It serves one model, "floor" (input x [-1, -1, 8] FP32,
// output y [-1, 4] FP32, max_batch_size 64), answering each ModelInfer with zeros of the
// right shape.
//
//   grpc_floor --port 8101 --api sync             # gRPC's synchronous API, answered inline
//   grpc_floor --port 8101 --api sync-worker      # sync handler waits for a worker thread
//   grpc_floor --port 8101 --api callback         # the callback API, answered inline
//   grpc_floor --port 8101 --api callback-worker  # callback handler; a worker thread answers
//   grpc_floor --port 8101 --api all-callback     # every method on the callback API (no
//   grpc_floor --port 8101 --api all-callback-worker  # synchronous server threads at all)
//
// The -worker modes stand for a batcher: the handler queues the request, one worker thread
// takes everything queued at once (a "batch") and completes each request; the sync variant
// wakes each waiting handler thread, the callback variant calls Finish from the worker.
// SIGUSR1 prints "requests N": the ModelInfer calls answered so far (the script divides the
// server's CPU time by it). bench/grpc_floor.sh runs perf_analyzer against each mode.

#include <grpcpp/grpcpp.h>

#include <pthread.h>
#include <atomic>
#include <condition_variable>

#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "inference/grpc_service.grpc.pb.h"

namespace {

constexpr int kFeatures = 8;
constexpr int kOutputs = 4;
constexpr int kMaxBatch = 64;

std::atomic<int64_t> g_requests{0};

// Zeros of y [B, 4] for a request of B sequences; INVALID_ARGUMENT for a request without x.
grpc::Status Answer(const inference::ModelInferRequest& request,
                    inference::ModelInferResponse* response) {
  g_requests.fetch_add(1, std::memory_order_relaxed);
  if (request.inputs_size() != 1 || request.inputs(0).shape_size() < 1) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "input x [B, T, 8] expected");
  }
  const int64_t B = request.inputs(0).shape(0);
  response->set_model_name(request.model_name());
  response->set_model_version("1");
  response->set_id(request.id());
  auto* out = response->add_outputs();
  out->set_name("y");
  out->set_datatype("FP32");
  out->add_shape(B);
  out->add_shape(kOutputs);
  response->add_raw_output_contents()->assign(static_cast<size_t>(B) * kOutputs * sizeof(float),
                                              '\0');
  return grpc::Status::OK;
}

// One worker thread completing queued work, all that is queued at once.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      std::deque<std::function<void()>> batch;
      batch.swap(jobs_);
      lock.unlock();
      for (auto& job : batch) job();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// ModelInfer on the callback API: answered at once, or by `worker` when given.
grpc::ServerUnaryReactor* AnswerOnCallback(grpc::CallbackServerContext* context,
                                           const inference::ModelInferRequest* request,
                                           inference::ModelInferResponse* response,
                                           Worker* worker) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (worker == nullptr) {
    reactor->Finish(Answer(*request, response));
  } else {
    worker->Post([=] { reactor->Finish(Answer(*request, response)); });
  }
  return reactor;
}

// The RPCs perf_analyzer asks before it sends requests.
template <typename Base>
class Metadata : public Base {
 public:
  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                          inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* response) override {
    response->set_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest*,
                          inference::ModelReadyResponse* response) override {
    response->set_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* request,
                             inference::ModelMetadataResponse* response) override {
    response->set_name(request->name());
    response->add_versions("1");
    response->set_platform("floor");
    auto* in = response->add_inputs();
    in->set_name("x");
    in->set_datatype("FP32");
    for (int64_t d : {-1, -1, kFeatures}) in->add_shape(d);
    auto* out = response->add_outputs();
    out->set_name("y");
    out->set_datatype("FP32");
    for (int64_t d : {-1, kOutputs}) out->add_shape(d);
    return grpc::Status::OK;
  }
  grpc::Status ModelConfig(grpc::ServerContext*, const inference::ModelConfigRequest* request,
                           inference::ModelConfigResponse* response) override {
    auto* c = response->mutable_config();
    c->set_name(request->name());
    c->set_max_batch_size(kMaxBatch);
    auto* in = c->add_input();
    in->set_name("x");
    in->set_data_type(inference::TYPE_FP32);
    in->add_dims(-1);
    in->add_dims(kFeatures);
    auto* out = c->add_output();
    out->set_name("y");
    out->set_data_type(inference::TYPE_FP32);
    out->add_dims(kOutputs);
    return grpc::Status::OK;
  }
};

class SyncService final : public Metadata<inference::GRPCInferenceService::Service> {
 public:
  explicit SyncService(bool via_worker) : via_worker_(via_worker) {}
  grpc::Status ModelInfer(grpc::ServerContext*, const inference::ModelInferRequest* request,
                          inference::ModelInferResponse* response) override {
    if (!via_worker_) return Answer(*request, response);
    std::promise<grpc::Status> done;
    std::future<grpc::Status> answer = done.get_future();
    worker_.Post([&] { done.set_value(Answer(*request, response)); });
    return answer.get();
  }

 private:
  const bool via_worker_;
  Worker worker_;
};

using CallbackBase = inference::GRPCInferenceService::WithCallbackMethod_ModelInfer<
    inference::GRPCInferenceService::Service>;

class CallbackService final : public Metadata<CallbackBase> {
 public:
  explicit CallbackService(bool via_worker) : via_worker_(via_worker) {}
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    return AnswerOnCallback(context, request, response, via_worker_ ? &worker_ : nullptr);
  }

 private:
  const bool via_worker_;
  Worker worker_;
};

// Every method on the callback API: no synchronous server threads at all, so gRPC's own
// threads read the requests and run the handlers.
class AllCallbackService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit AllCallbackService(bool via_worker) : via_worker_(via_worker) {}
  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override {
    return Inline(context, metadata_.ServerLive(nullptr, request, response));
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override {
    return Inline(context, metadata_.ServerReady(nullptr, request, response));
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    return Inline(context, metadata_.ModelReady(nullptr, request, response));
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    return Inline(context, metadata_.ModelMetadata(nullptr, request, response));
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    return Inline(context, metadata_.ModelConfig(nullptr, request, response));
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override {
    response->set_name("grpc_floor");
    return Inline(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest*,
                                            inference::ModelStatisticsResponse*) override {
    return Inline(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no statistics"));
  }
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    return AnswerOnCallback(context, request, response, via_worker_ ? &worker_ : nullptr);
  }

 private:
  static grpc::ServerUnaryReactor* Inline(grpc::CallbackServerContext* context,
                                          grpc::Status status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
  // The synchronous answers, called directly.
  class Answers final : public Metadata<inference::GRPCInferenceService::Service> {
  } metadata_;
  const bool via_worker_;
  Worker worker_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KServe v2 server with no model: the gRPC floor of a request"};
  int port = 8101;
  std::string api = "sync";
  app.add_option("--port", port, "gRPC port");
  app.add_option("--api", api,
                 "sync | sync-worker | callback | callback-worker | all-callback | "
                 "all-callback-worker")
      ->check(CLI::IsMember({"sync", "sync-worker", "callback", "callback-worker", "all-callback",
                             "all-callback-worker"}));
  // rnnserve's defaults (server/flags.h): gRPC's own (1 and 2) start and stop a thread per
  // call under concurrent load.
  int min_pollers = 4, max_pollers = 64;
  app.add_option("--min-pollers", min_pollers, "threads kept polling for synchronous calls");
  app.add_option("--max-pollers", max_pollers, "most threads polling for synchronous calls");
  CLI11_PARSE(app, argc, argv);

  // SIGINT, SIGTERM and SIGUSR1 are taken by sigwait below, not by a handler; blocked before gRPC's
  // threads start, so that they inherit the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<grpc::Service> service;
  if (api.rfind("sync", 0) == 0) {
    service = std::make_unique<SyncService>(api == "sync-worker");
  } else if (api.rfind("all-", 0) == 0) {
    service = std::make_unique<AllCallbackService>(api == "all-callback-worker");
  } else {
    service = std::make_unique<CallbackService>(api == "callback-worker");
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("0.0.0.0:" + std::to_string(port), grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.RegisterService(service.get());
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, min_pollers);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, max_pollers);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::cerr << "grpc_floor: cannot listen on port " << port << "\n";
    return 1;
  }
  std::cout << "grpc_floor: " << api << " on port " << port << std::endl;
  for (int signal = 0; sigwait(&signals, &signal) == 0 && signal == SIGUSR1;) {
    std::cout << "requests " << g_requests.load() << std::endl;
  }
  server->Shutdown();
  return 0;
}
