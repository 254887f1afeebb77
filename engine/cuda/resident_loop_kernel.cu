// The resident step loop (resident_loop_kernel.h). One cooperative launch, one grid barrier a
// step: the other blocks arrive on a counter, block 0 waits for them and publishes one word
// that carries the barrier's generation and the next step's active count and quit flag.
// Step k (parity p = k & 1) on every block:
//   1. after the barrier, block 0 signals `done` for the slots that finished at step k - 1
//      (every block's outputs of that step are written: the barrier fenced them);
//   2. each block computes its `units` hidden units (their rows of W and R in shared memory
//      when they fit, as the persistent kernels keep R on chip; their biases and LSTM's c of
//      every slot in shared memory too) for every slot of list[p] (slot, step, length):
//      x(t) and h(t-1) of `tile` slots at a time staged in shared memory by the whole block,
//      one warp a (slot, unit), the cell of the fused kernels (fused_rnn_cell.cuh);
//   3. block 0 then admits for step k + 1 into the other parity: slots that continue, and free
//      slots whose mailbox holds a new generation (read early in the step, so that the PCIe
//      round trip overlaps the step's work). With no slot active it polls the mailboxes while
//      the other blocks wait at the barrier.
// h(t) is exchanged through device memory by step parity; a slot at its step 0 starts from
// zeros. Outputs go straight to host-mapped memory.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/resident_loop_kernel.h"

namespace rnnserve::engine::cuda {
namespace {

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
__device__ void GridBarrier(ResidentDeviceState* s, unsigned& phase, int* sys, unsigned word,
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
__device__ unsigned Admit(const ResidentLoopArgs& a, int p, const unsigned (&joined)[kPerThread],
                          unsigned stop_early, unsigned long long& steps_run,
                          unsigned char* pending) {
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

template <FusedRnnCell kCell>
__global__ void __launch_bounds__(kResidentThreads) ResidentLoopKernel(const ResidentLoopArgs a) {
  constexpr int G = kFusedGates<kCell>;
  // [units][G][I] W rows and [units][G][H] R rows (weights_in_smem), [units][G] biases,
  // [units] bRn, [capacity][units] LSTM's c, then [tile][I + H]: the staged x(t) and h(t-1) of
  // `tile` slots (ResidentLoopSmem).
  extern __shared__ float smem[];
  __shared__ unsigned char pending[kResidentMaxSlots];
  __shared__ int tile_slot[kResidentMaxTile], tile_step[kResidentMaxTile];
  __shared__ int tile_len[kResidentMaxTile];
  __shared__ unsigned step_word;  // this step's active count | quit << 31
  const int j0 = blockIdx.x * a.units;
  const int u = min(a.units, a.H - j0);
  const int IH = a.I + a.H, cap = a.capacity;
  float* Ws = smem;
  float* Rs = smem + static_cast<size_t>(a.units) * G * a.I;
  float* bs = smem + (a.weights_in_smem ? static_cast<size_t>(a.units) * G * IH : 0);
  float* bRns = bs + a.units * G;
  float* cs = bRns + a.units;
  float* stage = cs + static_cast<size_t>(cap) * a.units;
  if (a.weights_in_smem) {
    for (int jj = 0; jj < u; ++jj) {
      for (int g = 0; g < G; ++g) {
        const int64_t row = static_cast<int64_t>(g) * a.H + j0 + jj;
        for (int k = threadIdx.x; k < a.I; k += blockDim.x) {
          Ws[(jj * G + g) * a.I + k] = a.W[row * a.I + k];
        }
        for (int k = threadIdx.x; k < a.H; k += blockDim.x) {
          Rs[(jj * G + g) * a.H + k] = a.R[row * a.H + k];
        }
      }
    }
  }
  for (int i = threadIdx.x; i < u * G; i += blockDim.x) {
    bs[i] = a.bias[(i % G) * a.H + j0 + i / G];
  }
  for (int i = threadIdx.x; i < u; i += blockDim.x) {
    bRns[i] = kCell == FusedRnnCell::kGru ? a.bRn[j0 + i] : 0.0f;
  }
  for (int i = threadIdx.x; i < kResidentMaxSlots; i += blockDim.x) pending[i] = 0;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __shared__ int finished_here;  // a slot finished in this block's step: fence to the host
  if (threadIdx.x == 0) finished_here = 0;
  unsigned phase = 0, admitted = 0, stop_early = 0;
  unsigned long long steps_run = 0;
  unsigned joined[kPerThread];
  for (int m = 0; m < kPerThread; ++m) joined[m] = 0;
  // The prologue: block 0 admits step 0 into parity 0 by admitting "after step -1" from
  // parity 1, zero.
  if (blockIdx.x == 0) {
    for (int m = 0; m < kPerThread; ++m) {
      const int i = threadIdx.x + m * kResidentThreads;
      if (i < cap) joined[m] = *reinterpret_cast<volatile const unsigned*>(&a.mail[i].joined);
    }
    if (threadIdx.x == 0)
      stop_early = *reinterpret_cast<volatile const uint32_t*>(&a.control->stop);
    admitted = Admit(a, 1, joined, stop_early, steps_run, pending);
  }
  for (int k = 0;; ++k) {
    const int p = k & 1;
    GridBarrier(a.state, phase, &finished_here, admitted, &step_word);
    if (blockIdx.x == 0) {
      for (int m = 0; m < kPerThread; ++m) {
        const int i = threadIdx.x + m * kResidentThreads;
        if (i < cap && pending[i]) {
          StoreReleaseSys(&a.mail[i].done, a.gen[i]);
          pending[i] = 0;
        }
        // Read early: the loads complete while the step computes.
        if (i < cap) joined[m] = *reinterpret_cast<volatile const unsigned*>(&a.mail[i].joined);
      }
      if (threadIdx.x == 0) {
        stop_early = *reinterpret_cast<volatile const uint32_t*>(&a.control->stop);
      }
    }
    if (step_word >> 31) return;
    const int n = static_cast<int>(step_word & 0x7fffffffu);
    const int4* list = reinterpret_cast<const int4*>(a.list) + p * cap;
    const float* hprev_all = a.h + static_cast<int64_t>(p) * cap * a.H;
    float* hnext_all = a.h + static_cast<int64_t>(p ^ 1) * cap * a.H;
    for (int s0 = 0; s0 < n; s0 += a.tile) {
      const int ns = min(a.tile, n - s0);
      __syncthreads();
      if (threadIdx.x < ns) {
        const int4 e = __ldcg(&list[s0 + threadIdx.x]);
        tile_slot[threadIdx.x] = e.x;
        tile_step[threadIdx.x] = e.y;
        tile_len[threadIdx.x] = e.z;
      }
      __syncthreads();
      // The whole block stages x(t) and h(t-1) of the tile's slots: 8 loads in flight a thread.
      const int total = ns * IH;
      for (int base = threadIdx.x; base < total; base += 8 * kResidentThreads) {
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int idx = base + e * kResidentThreads;
          v[e] = 0.0f;
          if (idx < total) {
            const int r = idx / IH, k2 = idx - r * IH;
            const int s = tile_slot[r], t = tile_step[r];
            if (k2 < a.I) {
              v[e] = __ldcg(a.x + (static_cast<int64_t>(s) * a.max_steps + t) * a.I + k2);
            } else if (t > 0) {
              v[e] = __ldcg(hprev_all + static_cast<int64_t>(s) * a.H + (k2 - a.I));
            }
          }
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int idx = base + e * kResidentThreads;
          if (idx < total) stage[idx] = v[e];
        }
      }
      __syncthreads();
      for (int item = warp; item < ns * u; item += warps) {
        const int r = item / u, jj = item - r * u, j = j0 + jj;
        const float* xs = stage + r * IH;
        const float* hs = xs + a.I;
        float ax[G], ah[G];
#pragma unroll
        for (int g = 0; g < G; ++g) ax[g] = ah[g] = 0.0f;
        for (int k2 = lane; k2 < a.I; k2 += 32) {
          const float xv = xs[k2];
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float* w = a.weights_in_smem ? Ws + (jj * G + g) * a.I
                                               : a.W + (static_cast<int64_t>(g) * a.H + j) * a.I;
            ax[g] = fmaf(w[k2], xv, ax[g]);
          }
        }
        for (int k2 = lane; k2 < a.H; k2 += 32) {
          const float hv = hs[k2];
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float* rw = a.weights_in_smem ? Rs + (jj * G + g) * a.H
                                                : a.R + (static_cast<int64_t>(g) * a.H + j) * a.H;
            ah[g] = fmaf(rw[k2], hv, ah[g]);
          }
        }
        // LSTM adds its two projections before the reduction (half the shuffles); GRU keeps
        // them apart (r scales the n gate's recurrent part).
#pragma unroll
        for (int g = 0; g < G; ++g) {
          if constexpr (kCell == FusedRnnCell::kLstm) {
            ax[g] += ah[g];
            ah[g] = 0.0f;
            for (int o = 16; o > 0; o >>= 1) ax[g] += __shfl_xor_sync(0xffffffffu, ax[g], o);
          } else {
            for (int o = 16; o > 0; o >>= 1) {
              ax[g] += __shfl_xor_sync(0xffffffffu, ax[g], o);
              ah[g] += __shfl_xor_sync(0xffffffffu, ah[g], o);
            }
          }
        }
        if (lane == 0) {
          const int s = tile_slot[r], t = tile_step[r], len = tile_len[r];
#pragma unroll
          for (int g = 0; g < G; ++g) ax[g] += bs[jj * G + g];
          const int64_t sj = static_cast<int64_t>(s) * a.H + j;
          float& cref = cs[s * a.units + jj];
          float c = (kCell == FusedRnnCell::kLstm && t > 0) ? cref : 0.0f;
          const float h = FusedCellStep<kCell>(ax, ah, hs[j], c, bRns[jj]);
          __stcg(hnext_all + sj, h);
          if constexpr (kCell == FusedRnnCell::kLstm) cref = c;
          if (a.y) a.y[(static_cast<int64_t>(s) * a.max_steps + t) * a.H + j] = h;
          if (t + 1 == len) {
            finished_here = 1;
            a.hy[sj] = h;
            if constexpr (kCell == FusedRnnCell::kLstm) a.cy[sj] = c;
          }
        }
      }
    }
    if (blockIdx.x == 0) {
      __syncthreads();
      admitted = Admit(a, p, joined, stop_early, steps_run, pending);
    }
  }
}

void* KernelOf(FusedRnnCell cell) {
  return cell == FusedRnnCell::kLstm
             ? reinterpret_cast<void*>(&ResidentLoopKernel<FusedRnnCell::kLstm>)
             : reinterpret_cast<void*>(&ResidentLoopKernel<FusedRnnCell::kGru>);
}

}  // namespace

size_t ResidentLoopSmem(const ResidentLoopArgs& a) {
  const size_t G = FusedRnnGates(a.cell);
  const size_t weights = a.weights_in_smem ? a.units * G * (a.I + a.H) : 0;
  const size_t biases = a.units * (G + 1), c = static_cast<size_t>(a.capacity) * a.units;
  return sizeof(float) * (weights + biases + c + static_cast<size_t>(a.tile) * (a.I + a.H));
}

cudaError_t ResidentLoopMaxBlocks(const ResidentLoopArgs& a, int device, int* blocks) {
  const size_t smem = ResidentLoopSmem(a);
  void* kernel = KernelOf(a.cell);
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  int per_sm = 0, sms = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kResidentThreads, smem);
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  *blocks = per_sm * sms;
  return cudaSuccess;
}

cudaError_t LaunchResidentLoop(const ResidentLoopArgs& a, cudaStream_t stream) {
  const dim3 grid((a.H + a.units - 1) / a.units), block(kResidentThreads);
  ResidentLoopArgs copy = a;
  void* params[] = {&copy};
  return cudaLaunchCooperativeKernel(KernelOf(a.cell), grid, block, params, ResidentLoopSmem(a),
                                     stream);
}

}  // namespace rnnserve::engine::cuda
