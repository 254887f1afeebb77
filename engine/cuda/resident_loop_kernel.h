#pragma once

// The resident step loop's kernels (plain C++ header): one persistent cooperative launch that
// advances every active slot of a one-direction LSTM or GRU (reset_after) layer one step at a
// time, until the host asks it to stop. Sequences join and leave between steps through
// host-mapped mailboxes (ResidentMailbox), one per slot. Two kernels: the register kernel
// (resident_loop_reg_kernel.cu: R in registers, several slots a warp, the input projection done
// once at join by LaunchResidentProjection) where ResidentRegLanes allows it, else the
// shared-memory kernel (resident_loop_kernel.cu: W and R rows in shared memory, a warp a slot
// and unit, the input projection every step).

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/cuda/fused_rnn_kernel.h"

namespace rnnserve::engine::cuda {

// One slot's mailbox in pinned, host-mapped memory. The host fills the slot's inputs and
// `length`, then publishes `joined` (generation g, a release store); the kernel takes the slot
// between two steps (acquire load), sets `started` = g, and after the slot's last step, once its
// outputs and final states are written, sets `done` = g (release, system scope). The host may
// join a slot again only after `done` equals its last generation.
struct alignas(64) ResidentMailbox {
  uint32_t joined = 0;   // host -> device: generation of the sequence in the slot
  int32_t length = 0;    // host -> device: its steps, in [1, max_steps]
  uint32_t started = 0;  // device -> host: generation taken (before its first step)
  uint32_t done = 0;     // device -> host: generation finished (outputs and states written)
};

// Whole-loop words in host-mapped memory.
struct ResidentControl {
  uint32_t stop = 0;  // host -> device: nonzero ends the launch between two steps
  uint32_t pad = 0;
  unsigned long long steps = 0;  // device -> host: steps run (with at least one active slot)
};

// The most slots one loop holds (block 0 keeps a flag per slot in shared memory).
inline constexpr int kResidentMaxSlots = 1024;

// Device-memory bookkeeping of the launch, zeroed before it.
// Step k reads the list of parity k & 1 (written by block 0 during step k - 1) while block 0
// writes the other's. The grid barrier: every block but 0 adds one to `arrived` a step; block 0
// waits for all of them, then publishes `go` = (barrier generation << 32) | (quit << 31) |
// (slots active in the next step), so that one load tells a block both.
struct ResidentDeviceState {
  unsigned arrived = 0;
  unsigned pad = 0;
  unsigned long long go = 0;
};

struct ResidentLoopArgs {
  FusedRnnCell cell = FusedRnnCell::kLstm;  // kLstm or kGru (reset_after)
  int I = 0, H = 0;
  int capacity = 0;   // slots, at most kResidentMaxSlots
  int max_steps = 0;  // the longest sequence a slot takes
  int units = 0;      // hidden units per block; blocks = ceil(H / units)
  int tile = 1;       // slots whose x(t) and h(t-1) a block stages in shared memory at once
  bool weights_in_smem = false;
  // The register kernel: floats of a row of h each lane holds (ResidentRegLanes); 0: the
  // shared-memory kernel.
  int lanes = 0;
  int h_stride = 0;  // floats a slot's row of `h` (H; the register kernel: 32 * lanes, zero-padded)
  // The register kernel's input projection [capacity, max_steps, G*H], biases included, written
  // by LaunchResidentProjection before a join is published; else null.
  float* xproj = nullptr;
  const float* WT = nullptr;           // the register kernel: W transposed, [I, G*H]
  const float* W = nullptr;            // [G*H, I]
  const float* R = nullptr;            // [G*H, H]
  const float* bias = nullptr;         // [G*H]: bW + bR, the GRU's n gate bW only
  const float* bRn = nullptr;          // [H] GRU: the n gate's recurrent bias; LSTM: null
  const float* x = nullptr;            // device [capacity, max_steps, I], copied in before a join
  ResidentMailbox* mail = nullptr;     // mapped [capacity]
  ResidentControl* control = nullptr;  // mapped
  float* y = nullptr;   // mapped [capacity, max_steps, H]: h after each step, or null
  float* hy = nullptr;  // mapped [capacity, H]: h after the last step
  float* cy = nullptr;  // mapped [capacity, H]: LSTM's c after the last step; GRU: null
  // Device scratch: h by step parity [2, capacity, h_stride]; by parity [2, capacity] each: a
  // slot's step and length (0: not active) (block 0's own), and the active slots' list [2,
  // capacity, 4] of (slot, step, length, 0); per slot the generation it runs [capacity]; and the
  // launch state. LSTM's c stays in the shared memory of the block that owns the unit.
  float* h = nullptr;
  int32_t* step = nullptr;
  int32_t* length = nullptr;
  int32_t* list = nullptr;
  uint32_t* gen = nullptr;
  ResidentDeviceState* state = nullptr;
};

// The most slots a block stages at once (ResidentLoopArgs::tile).
inline constexpr int kResidentMaxTile = 32;
// Threads per block of the loop.
inline constexpr int kResidentThreads = 256;

// The register kernel's floats of h a lane for a layer of `cell`, `H` hidden units and `units`
// hidden units a block; 0 where it is not compiled for them (units in {1, 2, 4}, H <= 256, at
// most 64 weights a thread).
int ResidentRegLanes(FusedRnnCell cell, int H, int units);
// The register kernel's input projection of the sequence joining `slot`: its `length` steps of
// args.x into args.xproj (a GEMM over the whole sequence, biases added), on `stream`.
cudaError_t LaunchResidentProjection(const ResidentLoopArgs& args, int slot, int length,
                                     cudaStream_t stream);
// The register kernel for args (lanes > 0), or null; its dynamic shared memory.
const void* ResidentRegKernel(const ResidentLoopArgs& args);
size_t ResidentRegSmem(const ResidentLoopArgs& args);

// Dynamic shared memory of a launch with `args`.
size_t ResidentLoopSmem(const ResidentLoopArgs& args);
// Starts the persistent launch on `stream` (cooperative: every block resident at once). Returns
// at once; the launch ends after control->stop is set.
cudaError_t LaunchResidentLoop(const ResidentLoopArgs& args, cudaStream_t stream);
// The most blocks of the loop that one device holds at once (for Create's check).
cudaError_t ResidentLoopMaxBlocks(const ResidentLoopArgs& args, int device, int* blocks);

}  // namespace rnnserve::engine::cuda
