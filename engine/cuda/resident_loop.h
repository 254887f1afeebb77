#pragma once

// ResidentLoop: step-level batching without chunk boundaries. One persistent kernel
// (resident_loop_kernel.h) keeps a recurrent layer's weights on chip and advances every active
// slot by one step at a time for as long as the loop lives; sequences join and leave between
// steps without a launch of the loop or a synchronisation with it.
//
// PARAMETERS AND BEHAVIOR
//   Join(slot, x, length) copies the sequence's inputs to the device (on the register kernel,
//   and computes their input projection for every step, one GEMM over the sequence) and
//   publishes it in the slot's host-mapped mailbox (a generation counter, a release store);
//   the kernel takes it before its next step (Started) and, after its last step, writes its
//   outputs and final states to host-mapped memory and then the slot's `done` generation
//   (Done). Other slots run on meanwhile. A sequence starts from zero states.
//   - capacity: slots, the most sequences one step advances. Must be positive.
//   - max_steps: the longest sequence a slot takes. Must be positive.
//   - units_per_block: hidden units a block computes (0: spread H over every multiprocessor;
//     on the register kernel the fewest of 1, 2, 4 that do). Must be in [0, H].
//   - register_kernel: the register kernel where it runs the layer (below); false: always the
//     shared-memory kernel.
//   Outputs equal the fused kernels' cell (fused_rnn_cell.cuh) in exact FP32, summed in another
//   order: within kFp32CrossEngine of the frameworks and the engine's other paths.
//
// WHAT IT RUNS (Unsupported says why not, for the metadata)
//   One-direction forward LSTM (sigmoid, tanh, tanh) or GRU with reset_after (sigmoid, tanh);
//   no projection, peepholes, clip or input_forget. Anything else keeps the chunked path.
//   Two kernels: the register kernel (H <= 256 with 1, 2 or 4 units a block: a block's rows of
//   R in its threads' registers, each warp several slots at once, the input projection read
//   from the join's GEMM) and, for other layers or units, the shared-memory kernel (W and R
//   rows of a block's hidden units in shared memory when they fit, else read from L2; a warp a
//   (slot, unit), the input projection every step).
//
// THREADS
//   Join from one thread at a time (the feeder); Started, Done and the output accessors from
//   any. The destructor stops the launch between two steps (active slots are abandoned) and
//   waits for it.
//
// SHARING THE DEVICE
//   The launch holds ceil(H / units) blocks (at most one a multiprocessor) and its shared
//   memory for as long as the loop lives; the register kernel also keeps the input projection
//   of every slot in device memory, capacity * max_steps * G * H floats (64 slots of 512 steps
//   of an LSTM(256): 128 MiB). Other kernels on the device run in what is left; a
//   cooperative or persistent kernel of another model that needs every multiprocessor at once
//   may not fit beside it (a second loop of this size does). Do not run the same instance's
//   chunked engine calls while its loop lives.
//
// LATENCY
//   A joined sequence is taken at the end of the step during which its mailbox write reaches
//   the device (the mailboxes are read early in each step), so it starts one or two steps
//   later; its `done` follows its last step by one grid barrier. One step costs one grid
//   barrier plus, per block, G * H (register kernel) or G * (I + H) (shared-memory kernel)
//   multiply-adds per hidden unit and active slot. While no slot is active, block 0 polls the
//   mailboxes and the other blocks wait at the barrier. On the register kernel Join waits for
//   the sequence's input projection (a kernel beside the loop) before it publishes the join.
//   Measured on an H200: bench/results/resident-loop-gpu-h200-2026-11-28.md.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/resident_loop_kernel.h"
#include "engine/ir.h"

namespace rnnserve::engine::cuda {

struct ResidentLoopOptions {
  int device = 0;
  int capacity = 64;    // slots
  int max_steps = 512;  // steps, per sequence
  // Whether h after every step reaches the host (outputs()), or only the final states.
  bool per_step_outputs = true;
  // Hidden units each block computes; 0: ceil(H / multiprocessors), the most blocks. More units
  // a block mean fewer blocks at each step's grid barrier and more work in each.
  int units_per_block = 0;
  // Whether the register kernel runs the layer where it can (resident_loop_kernel.h); false:
  // always the shared-memory kernel (for comparison).
  bool register_kernel = true;
};

class ResidentLoop {
 public:
  // Empty when the loop runs `spec`; else why not.
  static std::string Unsupported(const RecurrentSpec& spec);
  // Starts the loop on options.device. INVALID_ARGUMENT for a layer it does not run or bad
  // options; RESOURCE_EXHAUSTED when the device cannot hold the launch or its buffers.
  static absl::StatusOr<std::unique_ptr<ResidentLoop>> Create(const RecurrentSpec& spec,
                                                              const ResidentLoopOptions& options);
  ~ResidentLoop();
  ResidentLoop(const ResidentLoop&) = delete;
  ResidentLoop& operator=(const ResidentLoop&) = delete;

  // x: [length, I] row-major. INVALID_ARGUMENT for a slot or length out of range;
  // FAILED_PRECONDITION while the slot's previous sequence has not finished.
  absl::Status Join(int slot, const float* x, int length);
  // Whether the slot's last joined sequence has been taken by the kernel / has finished (and
  // its outputs may be read).
  bool Started(int slot) const;
  bool Done(int slot) const;
  // After Done(slot): [length, H] h after each step (null without per_step_outputs); [H]
  // final h; [H] final c (LSTM; else null).
  const float* outputs(int slot) const;
  const float* final_h(int slot) const;
  const float* final_c(int slot) const;
  // The length of the slot's last joined sequence.
  int length(int slot) const { return lengths_[slot]; }
  // Steps run so far (steps with at least one active slot).
  uint64_t steps() const;

  int capacity() const { return args_.capacity; }
  int max_steps() const { return args_.max_steps; }
  int input_size() const { return args_.I; }
  int hidden_size() const { return args_.H; }
  int blocks() const { return (args_.H + args_.units - 1) / args_.units; }
  bool weights_in_smem() const { return args_.weights_in_smem; }
  bool register_kernel() const { return args_.lanes > 0; }

 private:
  ResidentLoop() = default;
  absl::Status Start(const RecurrentSpec& spec, const ResidentLoopOptions& options);

  int device_ = 0;
  ResidentLoopArgs args_;
  cudaStream_t loop_stream_ = nullptr;  // the persistent launch
  cudaStream_t copy_stream_ = nullptr;  // inputs to the device
  bool launched_ = false;
  // Device: W, R, bias, bRn, W transposed; x; the input projection (register kernel); h, list,
  // step, length, gen, state.
  DeviceBuffer weights_, x_, xproj_, scratch_;
  // Host-mapped: mailboxes, control, y, hy, cy. Pinned: the inputs' staging.
  void* mapped_ = nullptr;
  float* staging_ = nullptr;
  std::vector<uint32_t> generation_;  // the last generation joined, per slot
  std::vector<int> lengths_;          // the last length joined, per slot
};

}  // namespace rnnserve::engine::cuda
