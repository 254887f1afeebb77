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
#include "engine/cuda/resident_loop_sync.cuh"

namespace rnnserve::engine::cuda {
namespace {

using resident_detail::AdmitFirst;
using resident_detail::AdmitState;
using resident_detail::GridBarrier;
using resident_detail::ResidentAdmit;
using resident_detail::StartStep;

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
  unsigned phase = 0, admitted = 0;
  AdmitState adm;
  if (blockIdx.x == 0) admitted = AdmitFirst(a, adm, pending);
  for (int k = 0;; ++k) {
    const int p = k & 1;
    GridBarrier(a.state, phase, &finished_here, admitted, &step_word);
    if (blockIdx.x == 0) StartStep(a, adm, pending);
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
      admitted = ResidentAdmit(a, p, adm, pending);
    }
  }
}

// The launch's kernel: the register kernel where args.lanes says so, else this file's.
void* KernelOf(const ResidentLoopArgs& a) {
  if (a.lanes > 0) return const_cast<void*>(ResidentRegKernel(a));
  return a.cell == FusedRnnCell::kLstm
             ? reinterpret_cast<void*>(&ResidentLoopKernel<FusedRnnCell::kLstm>)
             : reinterpret_cast<void*>(&ResidentLoopKernel<FusedRnnCell::kGru>);
}

}  // namespace

size_t ResidentLoopSmem(const ResidentLoopArgs& a) {
  if (a.lanes > 0) return ResidentRegSmem(a);
  const size_t G = FusedRnnGates(a.cell);
  const size_t weights = a.weights_in_smem ? a.units * G * (a.I + a.H) : 0;
  const size_t biases = a.units * (G + 1), c = static_cast<size_t>(a.capacity) * a.units;
  return sizeof(float) * (weights + biases + c + static_cast<size_t>(a.tile) * (a.I + a.H));
}

cudaError_t ResidentLoopMaxBlocks(const ResidentLoopArgs& a, int device, int* blocks) {
  const size_t smem = ResidentLoopSmem(a);
  void* kernel = KernelOf(a);
  if (kernel == nullptr) return cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  // The most shared memory on the loop's multiprocessors: a multiprocessor's split of L1 and
  // shared memory is set as blocks start on it, so kernels launched beside the loop (the
  // register kernel's input projection at every join) fit next to its block only if the split
  // the loop's block started with leaves them room (a split sized to the loop's own small
  // need would send them to the few multiprocessors the loop leaves free).
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                           cudaSharedmemCarveoutMaxShared);
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
  return cudaLaunchCooperativeKernel(KernelOf(a), grid, block, params, ResidentLoopSmem(a), stream);
}

}  // namespace rnnserve::engine::cuda
