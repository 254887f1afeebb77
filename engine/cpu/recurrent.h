#pragma once

// CPU kernel for one recurrent layer (LSTM, GRU, simple RNN; one or two directions) over a
// batch of variable-length sequences.
//
// Per direction: the input projection of every valid step is one GEMM over the packed valid
// rows ([sum(len), I] x [I, G*H]); then one recurrent GEMM (GEMV at B=1) per step over the
// sequences still running (sorted by length, they are a prefix), followed by the fused
// pointwise gate update. Steps past a sequence's length are never computed.
//
// Threads, unit split: the hidden units are split into one slice per thread; each thread owns the
// rows of R for its units (prepacked gate-major at Create, so they stay in its core's cache),
// computes its slice of every gate and of the new state, and the threads meet at one barrier per
// step (two for LSTM projection and GRU reset_after=false, whose second matmul needs the whole
// vector). The threads are the kernel's WorkTeam (work_team.h), as for the row split below.
//
// Threads, row split (layers of at most kMaxRowSplitUnits units, H and H'): each thread takes
// a block of the length-sorted rows (sequences) and runs every step of them alone: the input
// projection of its rows, then per step the recurrent matmul of its block against all of R
// (a few hundred KB at most, so it stays in that core's L1/L2 across steps) fused with the
// pointwise update. No barrier per step and no parallel region entered per step; blocks are
// claimed dynamically by the caller and helper threads that sleep between runs (work_team.h),
// so a descheduled thread's block is taken by another and nobody waits for a thread that has
// not started. At B=1 one thread
// runs the layer. Scratch lives in the kernel and is reused by every Run; Run is not reentrant.
//
// Masking: MaskSemantics::kKeras repeats the last output on masked steps (zeros with
// zero_output_for_mask, and zeros before a reversed sequence's first valid step);
// kOnnx writes zeros past each length. A step mask (Keras masks with masked steps inside a
// sequence) makes those steps keep the state; rows without one take the plain lengths path.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/engine.h"
#include "engine/ir.h"
#include "engine/tensor.h"

namespace rnnserve::engine::cpu {

struct DirectionRun;  // recurrent_steps.h
class StopCheck;      // stop_check.h
class WorkTeam;       // work_team.h

// How the threads of a Run share a layer's work (see above).
enum class RecurrentSplit {
  kAuto,   // row split where the layer allows it and the batch has a row per thread (or a
           // step too small to share), unit split otherwise
  kUnits,  // always the unit split
  kRows,   // the row split where the layer allows it (H, H' <= kMaxRowSplitUnits)
};

// The widest layer (hidden and output units) the row split runs: its R is at most 1 MiB (LSTM,
// FP32), which stays in one core's L2 across steps.
inline constexpr int kMaxRowSplitUnits = 256;
// For a layer the row split can run, under kAuto, a batch with fewer rows than threads takes
// the unit split only from this many multiply-adds per step (B * G * H * H'): an LSTM of 256
// units at B=1, not one of 128.
inline constexpr int64_t kMinUnitSplitStepWork = 256 * 1024;

struct RecurrentOptions {
  // Threads used inside one Run; 0 or negative: 1.
  int num_threads = 1;
  // Batch size the scratch is sized for at Create (it grows for larger batches).
  int max_batch_size = 64;
  // Steps the input-projection scratch is sized for at Create (it grows for longer batches).
  int max_steps = 0;
  // How W, R (and GRU R_n, LSTM P) are stored and multiplied (quant_gemm.h).
  CpuWeights weights = CpuWeights::kFp32;
  RecurrentSplit split = RecurrentSplit::kAuto;
};

class RecurrentKernel {
 public:
  static absl::StatusOr<std::unique_ptr<RecurrentKernel>> Create(
      const RecurrentSpec& spec, const std::string& name, const RecurrentOptions& options = {});

  // x: [B, T, I]; lengths: size B, each in [0, T]; step_mask: empty, or [B, T] with 1 for
  // valid steps (zeros at or past each length). initial_states: empty, or one tensor per state
  // in the order of the layer's state outputs (h [B, H'] then, LSTM, c [B, H], per direction).
  // Fills `outputs` in Keras's order: the sequence or last output (two with merge mode none),
  // then the final states when return_state is set. `final_states`, when not null, gets the
  // final states whatever return_state says. `stop` (null: never) is the Run's Batch::stop
  // (stop_check.h): once it says stop, the layer stops at its next step boundary and returns
  // CANCELLED; it counts the steps computed either way.
  absl::Status Run(const Tensor& x, absl::Span<const int32_t> lengths,
                   absl::Span<const uint8_t> step_mask, absl::Span<const Tensor> initial_states,
                   std::vector<Tensor>* outputs, std::vector<Tensor>* final_states = nullptr,
                   bool continues = false, StopCheck* stop = nullptr);

  int num_outputs() const;
  // Outputs that are sequences when return_sequences is set (1, or 2 with merge mode none).
  int num_sequence_outputs() const;
  int64_t memory_bytes() const;
  int num_threads() const { return num_threads_; }
  CpuWeights weights() const { return weights_; }
  // True when Run takes the row split for a batch of `batch` rows.
  bool UsesRowSplit(int64_t batch) const;
  // Which step kernel runs and when, for the engine's metadata.
  std::string split_description() const;

  // Layouts internal to engine/cpu (recurrent_internal.h), named here for its step functions.
  struct Packed;   // weights in the kernel's layout, per direction
  struct Scratch;  // per-run buffers, reused

 private:
  RecurrentKernel(const RecurrentSpec& spec, std::string name, int num_threads, CpuWeights weights,
                  RecurrentSplit split);
  ~RecurrentKernel();
  friend struct std::default_delete<RecurrentKernel>;

  void Pack();
  void Reserve(int64_t batch, int64_t rows);
  // Runs direction `d`; writes its sequence output [B, T, H'] (if not null) and final states.
  void RunDirection(int d, const Tensor& x, absl::Span<const int32_t> lengths,
                    const uint8_t* step_mask, const float* h0, const float* c0, float* seq_out,
                    float* h_out, float* c_out, bool continues, StopCheck* stop);
  // The unit split's steps of one direction, once RunDirection has sorted the rows and loaded
  // the states.
  void RunUnits(int d, const DirectionRun& run, const float* xin, int64_t I);
  // The row split's steps of one direction (recurrent_rows.cc), once RunDirection has sorted
  // the rows and loaded the states.
  void RunRows(int d, const DirectionRun& run, const float* xin, int64_t I);

  const RecurrentSpec spec_;
  const std::string name_;
  const int num_threads_;
  const CpuWeights weights_;
  const RecurrentSplit split_;
  const bool row_split_;         // the layer is narrow enough for the row split
  std::vector<int> unit_begin_;  // [threads + 1] hidden-unit slice of each thread
  std::vector<int> proj_begin_;  // [threads + 1] projection-unit slice of each thread
  std::vector<Packed> packed_;   // [directions]
  std::unique_ptr<Scratch> scratch_;
  std::unique_ptr<WorkTeam> team_;  // the row split's threads
};

}  // namespace rnnserve::engine::cpu
