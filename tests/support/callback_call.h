#pragma once

// Calls a gRPC callback-API unary handler in-process (no server) and waits for its answer.

#include <grpcpp/grpcpp.h>
#include <grpcpp/test/default_reactor_test_peer.h>

#include <future>
#include <thread>
#include <utility>

namespace rnnserve::testing {

// `handler(context)` calls the service's method with `context`; returns the status it finished
// the call with, which may come from a batcher's thread after the handler returned.
template <typename Handler>
grpc::Status CallAndWait(Handler handler) {
  grpc::CallbackServerContext context;
  std::promise<grpc::Status> answer;
  grpc::testing::DefaultReactorTestPeer peer(
      &context, [&answer](grpc::Status s) { answer.set_value(std::move(s)); });
  handler(&context);
  const grpc::Status status = answer.get_future().get();
  // The test reactor marks itself finished after it has called back: the context must live
  // until then.
  while (!peer.test_status_set()) std::this_thread::yield();
  return status;
}

}  // namespace rnnserve::testing
