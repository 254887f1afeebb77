#include "engine/cpu/work_team.h"

#include <algorithm>

#include "engine/cpu/flush_denormals.h"

namespace rnnserve::engine::cpu {

WorkTeam::WorkTeam(int threads) : threads_(std::max(1, threads)) {}

WorkTeam::~WorkTeam() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void WorkTeam::Drain(int worker) {
  for (int64_t i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < tasks_;) {
    (*task_)(worker, i);
  }
}

void WorkTeam::Helper(int worker) {
  const ScopedFlushDenormals flush;  // as the engine's calling threads (cpu_engine.cc)
  int64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (open_ && epoch_ != seen); });
    if (stop_) return;
    seen = epoch_;
    ++active_;
    lock.unlock();
    Drain(worker);
    lock.lock();
    if (--active_ == 0) idle_.notify_one();
  }
}

void WorkTeam::Run(int64_t tasks, const std::function<void(int, int64_t)>& task) {
  if (threads_ == 1 || tasks <= 1) {
    for (int64_t i = 0; i < tasks; ++i) task(0, i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (helpers_.empty()) {
      for (int w = 1; w < threads_; ++w) helpers_.emplace_back([this, w] { Helper(w); });
    }
    task_ = &task;
    tasks_ = tasks;
    next_.store(0, std::memory_order_relaxed);
    ++epoch_;
    open_ = true;
  }
  wake_.notify_all();
  Drain(0);
  // Every task is claimed; the ones helpers hold finish before they leave the call.
  std::unique_lock<std::mutex> lock(mu_);
  open_ = false;
  idle_.wait(lock, [&] { return active_ == 0; });
  task_ = nullptr;
}

}  // namespace rnnserve::engine::cpu
