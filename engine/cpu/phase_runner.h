#pragma once

// Runs a sequence of phases, each of `slices` independent tasks, on a team of threads: the
// recurrent kernel's input projection and steps. Phase p + 1 starts when every task of phase
// p is done (its tasks read what all of phase p wrote).
//
// Each thread takes its own slice first (the weights of a slice stay in that core's cache) and
// then any slice nobody has taken, so a thread that the OS has descheduled on a busy machine
// does not stall the phase: the running threads do its share. Waiting for a phase spins with
// pause for up to ~100 us, then yields the core on every check.

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rnnserve::engine::cpu {

class PhaseRunner {
 public:
  PhaseRunner(int slices, int64_t phases)
      : slices_(slices), phases_(phases), claimed_(new std::atomic<int64_t>[slices]) {
    for (int i = 0; i < slices; ++i) claimed_[i].store(-1, std::memory_order_relaxed);
  }

  // Called by every thread of the team with its id (any id in [0, slices) works; ids beyond
  // it only help). Returns when every phase is done. task(slice, phase) runs each task once.
  template <typename Task>
  void Work(int tid, Task&& task) {
    int64_t p;
    while ((p = phase_.load(std::memory_order_acquire)) < phases_) {
      bool ran = false;
      for (int i = 0; i < slices_ && !ran; ++i) {
        const int slice = (tid + i) % slices_;
        int64_t c = claimed_[slice].load(std::memory_order_relaxed);
        // Claims only grow; once phase p is over every slice has a claim >= p.
        if (c < p && claimed_[slice].compare_exchange_strong(c, p, std::memory_order_acq_rel)) {
          task(slice, p);
          ran = true;
          if (done_.fetch_add(1, std::memory_order_acq_rel) == slices_ - 1) {
            done_.store(0, std::memory_order_relaxed);
            phase_.store(p + 1, std::memory_order_release);
          }
        }
      }
      if (ran) continue;
      for (int spins = 0; phase_.load(std::memory_order_acquire) == p; ++spins) {
        if (spins < kSpinsBeforeYield) {
#if defined(__x86_64__) || defined(__i386__)
          _mm_pause();
#endif
        } else {
          std::this_thread::yield();
        }
      }
    }
  }

 private:
  // ~100 us of pause (longer than any step's imbalance on a quiet machine): a waiter keeps its
  // core while the other threads finish their tasks, and yields once a thread holding a task
  // has likely been descheduled, so that thread can run on a busy machine. (On a machine with
  // load 3x its cores, 10 ms of spinning made a B=1 H=512 LSTM 1.3-1.5x slower.)
  static constexpr int kSpinsBeforeYield = 1 << 11;
  const int slices_;
  const int64_t phases_;
  std::atomic<int64_t> phase_{0};
  std::atomic<int> done_{0};                         // tasks of the current phase finished
  std::unique_ptr<std::atomic<int64_t>[]> claimed_;  // [slices] last phase each was taken for
};

}  // namespace rnnserve::engine::cpu
