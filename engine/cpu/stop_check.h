#pragma once

// Batch::stop (engine/engine.h) as the CPU engine's threads ask it, and the steps a Run's
// recurrent layers computed (RunCounters::recurrent_steps_in_last_run). One per Run, shared
// by every layer and thread of it. Internal to engine/cpu.
//
// A recurrent layer asks at every kStopCheckSteps-th step: the unit split's slice 0 at the
// start of the step's main phase, each block of the row split before its step (the one that
// gets the lock asks; the others go on). Once it said stop, every thread sees it at its next
// step (or phase) and does no more work; the layer returns CANCELLED.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

#include "engine/engine.h"

namespace rnnserve::engine::cpu {

class StopCheck {
 public:
  // `stop` (null, or an empty function: never stop) must outlive the check.
  explicit StopCheck(const std::function<bool()>* stop)
      : stop_(stop != nullptr && *stop ? stop : nullptr) {}
  StopCheck(const StopCheck&) = delete;
  StopCheck& operator=(const StopCheck&) = delete;

  // Whether the run stops before step `step` of a layer: true once stop said so; asks it at
  // every nonzero multiple of kStopCheckSteps, unless another thread is asking.
  bool AtStep(int64_t step) {
    if (stopped()) return true;
    if (stop_ == nullptr || step == 0 || step % kStopCheckSteps != 0) return false;
    if (!asking_.try_lock()) return false;
    const bool stop = (*stop_)();
    asking_.unlock();
    if (stop) stopped_.store(true, std::memory_order_relaxed);
    return stop;
  }
  // Between layers: asks now (one thread).
  bool Now() {
    if (!stopped() && stop_ != nullptr && (*stop_)()) {
      stopped_.store(true, std::memory_order_relaxed);
    }
    return stopped();
  }
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

  // A thread of the direction running has computed `steps` steps of its rows.
  void Ran(int64_t steps) {
    int64_t seen = direction_steps_.load(std::memory_order_relaxed);
    while (steps > seen &&
           !direction_steps_.compare_exchange_weak(seen, steps, std::memory_order_relaxed)) {
    }
  }
  // After a direction (on the thread that runs the layer): its steps join the total.
  void EndDirection() { total_steps_ += direction_steps_.exchange(0, std::memory_order_relaxed); }
  int64_t total_steps() const { return total_steps_; }

 private:
  const std::function<bool()>* const stop_;
  std::atomic<bool> stopped_{false};
  std::mutex asking_;                        // one thread asks stop_ at a time
  std::atomic<int64_t> direction_steps_{0};  // the most steps a thread of it ran
  int64_t total_steps_ = 0;                  // the layer-running thread's only
};

}  // namespace rnnserve::engine::cpu
