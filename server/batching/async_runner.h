#pragma once

// AsyncRunner: a fixed set of threads that run posted tasks in the order they came. It carries
// the blocking part of requests that arrive on threads which must not block (gRPC's callback
// handlers) for a model without a batch scheduler: waiting for a free instance and the engine
// call.
//
// Destruction runs no queued task: each is called with run = false (its owner answers
// UNAVAILABLE), and the destructor waits for the running ones and joins the threads. It must
// not be destroyed on one of its own threads.

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace rnnserve::server::batching {

class AsyncRunner {
 public:
  // run: true on one of the runner's threads; false when the runner stopped before the task
  // ran (then on the destroying thread).
  using Task = absl::AnyInvocable<void(bool run)>;

  explicit AsyncRunner(int threads);
  ~AsyncRunner();
  AsyncRunner(const AsyncRunner&) = delete;
  AsyncRunner& operator=(const AsyncRunner&) = delete;

  void Post(Task task);
  // Whether the calling thread is one of the runner's.
  bool IsRunnerThread() const;

 private:
  void Work();

  absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace rnnserve::server::batching
