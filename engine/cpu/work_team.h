#pragma once

// A caller and up to threads - 1 helper threads sharing the independent tasks of one call: the
// recurrent kernel's row blocks (recurrent_rows.cc).
//
// The caller runs tasks itself from the start and helpers join when they wake, each claiming
// the next task left; Run returns once every task is done and no helper is still inside the
// call. A helper that has not woken by then never joins it, so the caller never waits for a
// thread the OS has not scheduled (an OpenMP region's join does: on a machine with more
// runnable threads than cores, that wait cost milliseconds a call). Helpers sleep on a
// condition variable between calls, with denormals flushed as the caller's thread.
// Run is not reentrant: one call at a time per team.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rnnserve::engine::cpu {

class WorkTeam {
 public:
  // threads: the caller and threads - 1 helpers, started on the first Run that has more than
  // one task (0 or negative: 1).
  explicit WorkTeam(int threads);
  ~WorkTeam();
  WorkTeam(const WorkTeam&) = delete;
  WorkTeam& operator=(const WorkTeam&) = delete;

  // Calls task(worker, i) once for each i in [0, tasks); worker is 0 for the caller and
  // 1 .. threads - 1 for the helpers (an index for per-thread scratch).
  void Run(int64_t tasks, const std::function<void(int worker, int64_t task)>& task);

  int threads() const { return threads_; }

 private:
  void Helper(int worker);
  // Claims and runs tasks of the current call until none is left.
  void Drain(int worker);

  const int threads_;
  std::vector<std::thread> helpers_;
  std::mutex mu_;
  std::condition_variable wake_;  // helpers: a new call or the end
  std::condition_variable idle_;  // the caller: the last helper left the call
  // Guarded by mu_: the current call's number, whether it still takes helpers, how many helpers
  // are inside it, and whether the team is ending.
  int64_t epoch_ = 0;
  bool open_ = false;
  int active_ = 0;
  bool stop_ = false;
  // The current call, valid while the caller is inside Run.
  const std::function<void(int, int64_t)>* task_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
};

}  // namespace rnnserve::engine::cpu
