// The resident step loop (resident_loop_kernel.h). One cooperative launch; every step has two
// phases separated by grid barriers:
//   A (block 0): slots that ran their last step signal `done`; free slots whose mailbox holds a
//     new generation join (step 0); the active slots go into `list`. With none active, block 0
//     polls the mailboxes while the other blocks wait at the barrier.
//   B (every block): each block owns `units` hidden units (their rows of W and R in shared
//     memory when they fit, as the persistent kernels keep R on chip) and computes them for
//     every active slot: one warp a slot, the cell of the fused kernels (fused_rnn_cell.cuh).
// h(t) is exchanged through device memory by step parity; a slot at its step 0 starts from
// zeros. Outputs go straight to host-mapped memory.

#include "engine/cuda/fused_rnn_cell.cuh"
#include "engine/cuda/launch.cuh"
#include "engine/cuda/resident_loop_kernel.h"

namespace rnnserve::engine::cuda {
namespace {

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
__device__ __forceinline__ void StoreReleaseGpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Every block of the launch meets here. Each block's writes before it (host-mapped ones too)
// are visible to every block, and to the host, after it. `phase` is thread 0's count of
// barriers passed.
__device__ void GridBarrier(ResidentDeviceState* s, unsigned& phase) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned target = phase + 1;
    __threadfence_system();
    if (atomicAdd(&s->barrier_count, 1u) == gridDim.x - 1) {
      atomicExch(&s->barrier_count, 0u);
      StoreReleaseGpu(&s->barrier_gen, target);
    } else {
      while (LoadAcquireGpu(&s->barrier_gen) != target) {
      }
    }
    phase = target;
  }
  __syncthreads();
}

// Phase A on block 0: returns after the list holds at least one slot, or stop was asked.
__device__ void Admit(const ResidentLoopArgs& a, bool ran) {
  __shared__ int count, stop;
  const ResidentMailbox* mail = a.mail;
  while (true) {
    if (threadIdx.x == 0) {
      count = 0;
      stop = *reinterpret_cast<volatile const uint32_t*>(&a.control->stop) != 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < a.capacity; i += blockDim.x) {
      int len = a.length[i];
      if (ran && len > 0 && ++a.step[i] == len) {
        StoreReleaseSys(&a.mail[i].done, a.gen[i]);  // the outputs were fenced at the barrier
        len = a.length[i] = 0;
      }
      if (len == 0 && !stop) {
        const unsigned g = LoadAcquireSys(&mail[i].joined);
        if (g != a.gen[i]) {
          len = *reinterpret_cast<volatile const int32_t*>(&mail[i].length);
          len = len < 1 ? 1 : (len > a.max_steps ? a.max_steps : len);  // the host checks
          a.gen[i] = g;
          a.step[i] = 0;
          a.length[i] = len;
          *reinterpret_cast<volatile uint32_t*>(&a.mail[i].started) = g;
        }
      }
      if (len > 0) a.list[atomicAdd(&count, 1)] = i;
    }
    __syncthreads();
    ran = false;
    if (count > 0 || stop) break;
  }
  if (threadIdx.x == 0) {
    a.state->active = count;
    a.state->quit = stop;
    if (count > 0) {
      auto* steps = reinterpret_cast<volatile unsigned long long*>(&a.control->steps);
      *steps = *steps + 1;
    }
  }
}

template <FusedRnnCell kCell>
__global__ void __launch_bounds__(kResidentThreads)
    ResidentLoopKernel(const ResidentLoopArgs a) {
  constexpr int G = kFusedGates<kCell>;
  extern __shared__ float smem[];  // [units][G][I] W rows, then [units][G][H] R rows
  const int j0 = blockIdx.x * a.units;
  const int u = min(a.units, a.H - j0);
  float* Ws = smem;
  float* Rs = smem + static_cast<size_t>(a.units) * G * a.I;
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
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  unsigned phase = 0;
  bool ran = false;
  for (int parity = 0;; parity ^= 1) {
    if (blockIdx.x == 0) Admit(a, ran);
    GridBarrier(a.state, phase);
    if (__ldcg(&a.state->quit)) return;
    const int n = __ldcg(&a.state->active);
    for (int idx = warp; idx < n; idx += warps) {
      const int s = __ldcg(&a.list[idx]);
      const int t = __ldcg(&a.step[s]);
      const int len = __ldcg(&a.length[s]);
      const float* xs = a.x + (static_cast<int64_t>(s) * a.max_steps + t) * a.I;
      const float* hp = a.h + (static_cast<int64_t>(parity) * a.capacity + s) * a.H;
      float* hn = a.h + (static_cast<int64_t>(parity ^ 1) * a.capacity + s) * a.H;
      for (int jj = 0; jj < u; ++jj) {
        const int j = j0 + jj;
        float ax[G], ah[G];
#pragma unroll
        for (int g = 0; g < G; ++g) ax[g] = ah[g] = 0.0f;
        for (int k = lane; k < a.I; k += 32) {
          const float xv = __ldcg(xs + k);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            const float* w = a.weights_in_smem ? Ws + (jj * G + g) * a.I
                                               : a.W + (static_cast<int64_t>(g) * a.H + j) * a.I;
            ax[g] = fmaf(w[k], xv, ax[g]);
          }
        }
        if (t > 0) {
          for (int k = lane; k < a.H; k += 32) {
            const float hv = __ldcg(hp + k);
#pragma unroll
            for (int g = 0; g < G; ++g) {
              const float* r = a.weights_in_smem
                                   ? Rs + (jj * G + g) * a.H
                                   : a.R + (static_cast<int64_t>(g) * a.H + j) * a.H;
              ah[g] = fmaf(r[k], hv, ah[g]);
            }
          }
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
          for (int o = 16; o > 0; o >>= 1) {
            ax[g] += __shfl_xor_sync(0xffffffffu, ax[g], o);
            ah[g] += __shfl_xor_sync(0xffffffffu, ah[g], o);
          }
        }
        if (lane == 0) {
#pragma unroll
          for (int g = 0; g < G; ++g) ax[g] += a.bias[g * a.H + j];
          const int64_t sj = static_cast<int64_t>(s) * a.H + j;
          const float hprev = t > 0 ? __ldcg(hp + j) : 0.0f;
          float c = (kCell == FusedRnnCell::kLstm && t > 0) ? a.c[sj] : 0.0f;
          const float bRn = kCell == FusedRnnCell::kGru ? a.bRn[j] : 0.0f;
          const float h = FusedCellStep<kCell>(ax, ah, hprev, c, bRn);
          __stcg(hn + j, h);
          if constexpr (kCell == FusedRnnCell::kLstm) a.c[sj] = c;
          a.y[(static_cast<int64_t>(s) * a.max_steps + t) * a.H + j] = h;
          if (t + 1 == len) {
            a.hy[sj] = h;
            if constexpr (kCell == FusedRnnCell::kLstm) a.cy[sj] = c;
          }
        }
      }
    }
    GridBarrier(a.state, phase);
    ran = true;
  }
}

template <FusedRnnCell kCell>
auto* KernelFor() {
  return &ResidentLoopKernel<kCell>;
}

}  // namespace

size_t ResidentLoopSmem(const ResidentLoopArgs& a) {
  if (!a.weights_in_smem) return 0;
  return sizeof(float) * a.units * FusedRnnGates(a.cell) * (a.I + a.H);
}

static void* KernelOf(FusedRnnCell cell) {
  return cell == FusedRnnCell::kLstm ? reinterpret_cast<void*>(KernelFor<FusedRnnCell::kLstm>())
                                     : reinterpret_cast<void*>(KernelFor<FusedRnnCell::kGru>());
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
