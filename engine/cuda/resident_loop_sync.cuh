#pragma once

// The resident step loop's synchronisation (resident_loop_kernel.h), shared by its kernels
// (.cu files only): the one-word grid barrier, block 0's admission of slots between two steps,
// and the start of a step (done signals of the slots that finished, early mailbox reads).

#include "engine/cuda/resident_loop_kernel.h"

namespace rnnserve::engine::cuda::resident_detail {

constexpr int kPerThread = kResidentMaxSlots / kResidentThreads;  // mailboxes block 0 reads

__device__ __forceinline__ unsigned LoadAcquireSys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreReleaseSys(unsigned* p, unsigned v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned LoadAcquireGpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long LoadAcquireGpu64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreReleaseGpu64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Every block of the launch meets here; each block's writes before it are visible to every
// block after it, and, when *sys is set (then cleared), to the host too. `phase`: thread 0's
// count of barriers passed. Block 0 passes `word` (Admit's: active count, quit << 31) and every
// block gets it back in *out.
__device__ inline void GridBarrier(ResidentDeviceState* s, unsigned& phase, int* sys, unsigned word,
                                   unsigned* out) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned target = phase + 1;
    if (*sys) {
      *sys = 0;
      __threadfence_system();
    } else {
      __threadfence();
    }
    if (blockIdx.x == 0) {
      const unsigned expect = target * (gridDim.x - 1);  // wraps with `arrived`
      while (static_cast<int>(LoadAcquireGpu(&s->arrived) - expect) < 0) {
      }
      StoreReleaseGpu64(&s->go, (static_cast<unsigned long long>(target) << 32) | word);
      *out = word;
    } else {
      atomicAdd(&s->arrived, 1u);
      unsigned long long g;
      while (static_cast<unsigned>((g = LoadAcquireGpu64(&s->go)) >> 32) != target) {
      }
      *out = static_cast<unsigned>(g);
    }
    phase = target;
  }
  __syncthreads();
}

// Block 0, after step k (parity p): builds parity q = p ^ 1's list for step k + 1. `joined`
// holds the mailboxes' generations and `stop_early` (thread 0's) the stop flag, read early in
// step k, so that no read of host-mapped memory waits in the step's critical path unless a
// sequence joins; `steps_run` (thread 0's) counts steps with a slot active, written to the host
// without a read; slots finishing at step k are flagged in
// `pending` (done is signalled after the next barrier). Polls while nothing would run.
__device__ inline unsigned Admit(const ResidentLoopArgs& a, int p,
                                 const unsigned (&joined)[kPerThread], unsigned stop_early,
                                 unsigned long long& steps_run, unsigned char* pending) {
  __shared__ int count, stop, any_pending;
  const int q = p ^ 1;
  const int cap = a.capacity;
  bool first = true;
  while (true) {
    if (threadIdx.x == 0) {
      count = any_pending = 0;
      stop =
          (first ? stop_early : *reinterpret_cast<volatile const uint32_t*>(&a.control->stop)) != 0;
    }
    __syncthreads();
    for (int m = 0; m < kPerThread; ++m) {
      const int i = threadIdx.x + m * kResidentThreads;
      if (i >= cap) break;
      int len = 0, t = 0;
      if (first) {
        const int L = a.length[p * cap + i];
        if (L > 0) {
          if (a.step[p * cap + i] + 1 == L) {
            pending[i] = 1;
            any_pending = 1;
          } else {
            len = L;
            t = a.step[p * cap + i] + 1;
          }
        }
      } else {
        len = a.length[q * cap + i];  // a slot that joined in an earlier poll
        t = 0;
      }
      if (len == 0 && !pending[i] && !stop) {
        unsigned g = first ? joined[m] : LoadAcquireSys(&a.mail[i].joined);
        if (g != a.gen[i]) {
          if (first) g = LoadAcquireSys(&a.mail[i].joined);  // orders the reads below
          len = *reinterpret_cast<volatile const int32_t*>(&a.mail[i].length);
          len = len < 1 ? 1 : (len > a.max_steps ? a.max_steps : len);  // the host checks
          t = 0;
          a.gen[i] = g;
          *reinterpret_cast<volatile uint32_t*>(&a.mail[i].started) = g;
        }
      }
      a.length[q * cap + i] = len;
      a.step[q * cap + i] = t;
      if (len > 0) {
        const int at = q * cap + atomicAdd(&count, 1);
        reinterpret_cast<int4*>(a.list)[at] = make_int4(i, t, len, 0);
      }
    }
    __syncthreads();
    first = false;
    if (count > 0 || stop || any_pending) break;
  }
  if (threadIdx.x == 0 && count > 0) {
    *reinterpret_cast<volatile unsigned long long*>(&a.control->steps) = ++steps_run;
  }
  return static_cast<unsigned>(count) | (stop ? 1u << 31 : 0u);
}

// Block 0's state between steps: the mailboxes' generations and the stop flag read early,
// the steps run, and the slots whose done signal waits for the next barrier.
struct AdmitState {
  unsigned joined[kPerThread];
  unsigned stop_early = 0;
  unsigned long long steps_run = 0;
};

// Block 0, before step 0: admits step 0's slots into parity 0 (as if after a step -1 of
// parity 1, zero). Returns Admit's word.
__device__ inline unsigned AdmitFirst(const ResidentLoopArgs& a, AdmitState& s,
                                      unsigned char* pending) {
  for (int m = 0; m < kPerThread; ++m) {
    const int i = threadIdx.x + m * kResidentThreads;
    s.joined[m] = 0;
    if (i < a.capacity)
      s.joined[m] = *reinterpret_cast<volatile const unsigned*>(&a.mail[i].joined);
  }
  if (threadIdx.x == 0)
    s.stop_early = *reinterpret_cast<volatile const uint32_t*>(&a.control->stop);
  return Admit(a, 1, s.joined, s.stop_early, s.steps_run, pending);
}

// Block 0, right after a step's barrier: the done signals of the slots that finished in the
// step before (every block's outputs of it are written: the barrier fenced them), and the
// mailboxes and stop flag read early, so that the loads complete while the step computes.
__device__ inline void StartStep(const ResidentLoopArgs& a, AdmitState& s, unsigned char* pending) {
  for (int m = 0; m < kPerThread; ++m) {
    const int i = threadIdx.x + m * kResidentThreads;
    if (i < a.capacity && pending[i]) {
      StoreReleaseSys(&a.mail[i].done, a.gen[i]);
      pending[i] = 0;
    }
    if (i < a.capacity)
      s.joined[m] = *reinterpret_cast<volatile const unsigned*>(&a.mail[i].joined);
  }
  if (threadIdx.x == 0)
    s.stop_early = *reinterpret_cast<volatile const uint32_t*>(&a.control->stop);
}

// Block 0, after step k of parity p: Admit with the state read early in the step.
__device__ inline unsigned ResidentAdmit(const ResidentLoopArgs& a, int p, AdmitState& s,
                                         unsigned char* pending) {
  return Admit(a, p, s.joined, s.stop_early, s.steps_run, pending);
}

}  // namespace rnnserve::engine::cuda::resident_detail
