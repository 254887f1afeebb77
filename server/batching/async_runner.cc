#include "server/batching/async_runner.h"

#include <utility>

#include "server/batching/instance_threads.h"

namespace rnnserve::server::batching {

AsyncRunner::AsyncRunner(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

AsyncRunner::~AsyncRunner() {
  std::deque<Task> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(tasks_);
  }
  for (Task& task : left) task(false);
  for (std::thread& t : threads_) t.join();
}

void AsyncRunner::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      return;
    }
  }
  task(false);
}

bool AsyncRunner::IsRunnerThread() const { return CallingThreadIsOneOf(threads_); }

void AsyncRunner::Work() {
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      struct Ready {
        const AsyncRunner* r;
        bool operator()() const ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return r->stopping_ || !r->tasks_.empty();
        }
      };
      const Ready ready{this};
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task(true);
  }
}

}  // namespace rnnserve::server::batching
