#pragma once

// The per-step barrier of the recurrent kernel's threads.
//
// A step of a B=1 layer takes tens of microseconds, so waiting must not go through the kernel
// on a quiet machine: a waiter spins (with pause) for about as long as a step takes. Past
// that, it yields its core on every check, so that on an oversubscribed machine (more runnable
// threads than cores) the thread it waits for gets to run instead of the spinner burning its
// time slice. Reusable: a generation counter separates consecutive waits.

#include <atomic>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rnnserve::engine::cpu {

class StepBarrier {
 public:
  explicit StepBarrier(int threads) : threads_(threads) {}

  void Wait() {
    if (threads_ <= 1) return;
    const int gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == threads_ - 1) {
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      return;
    }
    for (int spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins) {
      if (spins < kSpinsBeforeYield) {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kSpinsBeforeYield = 4096;  // ~ a few tens of microseconds of pause
  const int threads_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
};

}  // namespace rnnserve::engine::cpu
