#pragma once

// How FusedRnn's grid kernels pass h(t) between their blocks without a grid barrier (CUDA
// only): each value is stored with the number of its step in one 64-bit word (FusedRnnSync in
// fused_rnn_kernel.h says which numbers), and a reader repeats its load of a word until the
// word carries the step it waits for. The load that finds the value ready is the load that
// reads it: one round trip through L2 a step.

#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {

using FusedWord = unsigned long long;

// Two words, each loaded at GPU scope (past L1: other SMs wrote them).
__device__ __forceinline__ void LoadFusedWords(const FusedWord* p, FusedWord& w0, FusedWord& w1) {
  asm volatile("ld.relaxed.gpu.v2.u64 {%0, %1}, [%2];\n" : "=l"(w0), "=l"(w1) : "l"(p) : "memory");
}

__device__ __forceinline__ FusedWord LoadFusedWord(const FusedWord* p) {
  FusedWord w;
  asm volatile("ld.relaxed.gpu.u64 %0, [%1];\n" : "=l"(w) : "l"(p) : "memory");
  return w;
}

__device__ __forceinline__ void StoreFusedWord(FusedWord* p, float v, unsigned tag) {
  const FusedWord w = (static_cast<FusedWord>(tag) << 32) | __float_as_uint(v);
  asm volatile("st.relaxed.gpu.u64 [%0], %1;\n" ::"l"(p), "l"(w) : "memory");
}

// A 32-bit progress word (FusedRnnStackArgs::done), at GPU scope.
__device__ __forceinline__ unsigned LoadFusedFlag(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void StoreFusedFlag(unsigned* p, unsigned v) {
  asm volatile("st.relaxed.gpu.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned FusedTag(FusedWord w) { return static_cast<unsigned>(w >> 32); }
__device__ __forceinline__ float FusedValue(FusedWord w) {
  return __uint_as_float(static_cast<unsigned>(w));
}

// Copies the n words at `in` into hs as floats once each carries `want`, with all threads of
// the block. Each thread issues the loads of up to kPairs pairs of words at once (one round
// trip when they are ready). A pair that is not ready is then waited on alone, and only after
// it the later pairs that were not ready are loaded again, together: every block writes its
// words at about the same time, so while one is not ready the others mostly are not either,
// and polling them all would flood L2 with loads that slow down the stores they wait for.
// kTwo: also the n words at in2 into hs2 once each carries want2, their loads issued with the
// first's (one round trip for both where both are ready).
template <int kPairs = 4, bool kTwo = false>
__device__ __forceinline__ void GatherFusedWords(const FusedWord* in, float* hs, int n,
                                                 unsigned want, const FusedWord* in2 = nullptr,
                                                 float* hs2 = nullptr, unsigned want2 = 0) {
  const int pairs = n / 2, total = kTwo ? 2 * pairs : pairs, stride = blockDim.x;
  // Pair p: its words, its floats and its tag (the second array's past `pairs`).
  auto words = [&](int p) -> const FusedWord* {
    if constexpr (kTwo) return p < pairs ? in + 2 * p : in2 + 2 * (p - pairs);
    return in + 2 * p;
  };
  auto floats = [&](int p) -> float* {
    if constexpr (kTwo) return p < pairs ? hs + 2 * p : hs2 + 2 * (p - pairs);
    return hs + 2 * p;
  };
  auto tag = [&](int p) -> unsigned {
    if constexpr (kTwo) return p < pairs ? want : want2;
    return want;
  };
  auto ready = [](const FusedWord(&w)[2], unsigned t) {
    return FusedTag(w[0]) == t && FusedTag(w[1]) == t;
  };
  // Up to two pairs a thread (one sequence at the widths the kernels run): each pair is waited
  // on in turn with the loads of the others already issued, which measured faster there.
  const bool few = total <= 2 * stride;
  for (int p0 = threadIdx.x; p0 < total; p0 += kPairs * stride) {
    FusedWord w[kPairs][2];
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int p = p0 + k * stride;
      if (p < total) LoadFusedWords(words(p), w[k][0], w[k][1]);
    }
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int p = p0 + k * stride;
      if (p >= total) break;
      const unsigned t = tag(p);
      if (!ready(w[k], t)) {
        do {
          LoadFusedWords(words(p), w[k][0], w[k][1]);
        } while (!ready(w[k], t));
        if (few) {
          floats(p)[0] = FusedValue(w[k][0]);
          floats(p)[1] = FusedValue(w[k][1]);
          continue;
        }
#pragma unroll
        for (int m = k + 1; m < kPairs; ++m) {
          const int q = p0 + m * stride;
          if (q < total && !ready(w[m], tag(q))) LoadFusedWords(words(q), w[m][0], w[m][1]);
        }
      }
      floats(p)[0] = FusedValue(w[k][0]);
      floats(p)[1] = FusedValue(w[k][1]);
    }
  }
  // An odd word at the end of each array.
  if ((n & 1) && threadIdx.x < (kTwo ? 2 : 1)) {
    const FusedWord* last = (threadIdx.x == 0 ? in : in2) + n - 1;
    const unsigned t = threadIdx.x == 0 ? want : want2;
    FusedWord w;
    do {
      w = LoadFusedWord(last);
    } while (FusedTag(w) != t);
    (threadIdx.x == 0 ? hs : hs2)[n - 1] = FusedValue(w);
  }
}

// The end of a launch: the last block out moves the tags' base past the `steps` + 1 tags this
// launch used (after base), for the next launch. Every thread of the block calls it.
__device__ __forceinline__ void LeaveFusedExchange(FusedRnnSync* sync, unsigned base, int steps) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&sync->exits, 1u) == gridDim.x - 1) {
      sync->exits = 0;
      sync->base = base + steps + 1;
      __threadfence();
    }
  }
}

}  // namespace rnnserve::engine::cuda
