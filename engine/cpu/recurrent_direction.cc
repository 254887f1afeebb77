// The step loop of one direction of a recurrent layer: input projection, then per step the
// recurrent matmul of each thread's unit slice and its cell's pointwise update
// (recurrent_steps.cc).

#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/cpu/phase_runner.h"
#include "engine/cpu/recurrent.h"
#include "engine/cpu/recurrent_internal.h"
#include "engine/cpu/recurrent_steps.h"
#include "engine/cpu/work_team.h"

namespace rnnserve::engine::cpu {
namespace {

// s.offset[b]: the first row of sequence b's valid steps, packed in batch order. Returns the
// number of rows.
int64_t SetRowOffsets(absl::Span<const int32_t> lengths, RecurrentKernel::Scratch& s) {
  int64_t rows = 0;
  for (size_t b = 0; b < lengths.size(); ++b) {
    s.offset[b] = rows;
    rows += lengths[b];
  }
  return rows;
}

// Copies the valid steps of x [B, T, I] into s.xpack [rows, I] at the row offsets.
const float* PackValidRows(const Tensor& x, absl::Span<const int32_t> lengths,
                           RecurrentKernel::Scratch& s) {
  const int64_t T = x.dim(1), I = x.dim(2);
  for (size_t b = 0; b < lengths.size(); ++b) {
    std::copy_n(x.f32() + b * T * I, lengths[b] * I, s.xpack.data() + s.offset[b] * I);
  }
  return s.xpack.data();
}

// Sorts the sequences by length, longest first (the ones still running at step s are a
// prefix): s.order, s.len, s.active; with a step mask also s.first_valid.
void SortRowsByLength(absl::Span<const int32_t> lengths, const uint8_t* step_mask, int64_t T,
                      bool reverse, RecurrentKernel::Scratch& s) {
  const int64_t B = static_cast<int64_t>(lengths.size());
  std::iota(s.order.begin(), s.order.begin() + B, 0);
  std::stable_sort(s.order.begin(), s.order.begin() + B,
                   [&](int a, int b) { return lengths[a] > lengths[b]; });
  for (int64_t k = 0; k < B; ++k) s.len[k] = lengths[s.order[k]];
  const int64_t max_len = B > 0 ? s.len[0] : 0;
  s.active.assign(max_len, 0);
  {
    int64_t n = B;
    for (int64_t st = 0; st < max_len; ++st) {
      while (n > 0 && s.len[n - 1] <= st) --n;
      s.active[st] = static_cast<int>(n);
    }
  }
  if (step_mask) {
    s.first_valid.assign(B, 0);
    for (int64_t k = 0; k < B; ++k) {
      int64_t st = 0;
      while (st < s.len[k] && !step_mask[s.order[k] * T + (reverse ? s.len[k] - 1 - st : st)]) {
        ++st;
      }
      s.first_valid[k] = st;
    }
  }
}

// Sorted row k's initial h [H'] (and LSTM c [H]): the given states, or zeros.
void LoadInitialStates(int64_t B, int H, int Hp, bool lstm, const float* h0, const float* c0,
                       RecurrentKernel::Scratch& s) {
  for (int64_t k = 0; k < B; ++k) {
    const int b = s.order[k];
    float* h = s.h[0].data() + k * Hp;
    if (h0) {
      std::copy_n(h0 + b * Hp, Hp, h);
    } else {
      std::fill_n(h, Hp, 0.0f);
    }
    if (lstm) {
      float* c = s.c.data() + k * H;
      if (c0) {
        std::copy_n(c0 + b * H, H, c);
      } else {
        std::fill_n(c, H, 0.0f);
      }
    }
  }
}

// Positions of the sequence output [B, T, H'] no valid step wrote. Only a forward Keras layer
// has positions after its last step; Keras repeats the last output (h_out) there. Every other
// unwritten position precedes the first processed step (or is ONNX padding) and is zero. A
// continuing batch (Batch::continues) repeats the initial h past a length of 0.
void FillUnwrittenOutputs(const RecurrentSpec& spec, const RecurrentDirection& dir,
                          absl::Span<const int32_t> lengths, int64_t T, int Hp, const float* h_out,
                          float* seq_out, bool continues) {
  const bool repeat =
      spec.masking == MaskSemantics::kKeras && !spec.zero_output_for_mask && !dir.reverse;
  for (int64_t b = 0; b < static_cast<int64_t>(lengths.size()); ++b) {
    const int64_t len = lengths[b];
    if (len == T) continue;
    int64_t from = len, to = T;
    if (dir.outputs_in_processing_order) from = 0, to = T - len;
    for (int64_t p = from; p < to; ++p) {
      float* dst = seq_out + (b * T + p) * Hp;
      if (repeat && (len > 0 || continues)) {
        std::copy_n(h_out + b * Hp, Hp, dst);
      } else {
        std::fill_n(dst, Hp, 0.0f);
      }
    }
  }
}

}  // namespace

void MainPhase(const DirectionRun& r, const SliceStep& t) {
  RecurrentMatmul(r, t);
  switch (r.spec.cell) {
    case CellType::kLstm:
      return LstmStep(r, t);
    case CellType::kGru:
      return r.spec.reset_after ? GruResetAfterStep(r, t) : GruResetBeforeGatesStep(r, t);
    default:
      return SimpleRnnStep(r, t);
  }
}

namespace {

// The phases of one step, after the recurrent matmul's own: GRU reset_after=false's n gate and
// the LSTM projection each need the whole vector of the phase before.
enum class PhaseKind { kMain, kGruN, kProjection };

// The phases of each step of a layer.
std::vector<PhaseKind> StepPhases(const RecurrentSpec& spec) {
  std::vector<PhaseKind> kinds = {PhaseKind::kMain};
  if (spec.cell == CellType::kGru && !spec.reset_after) kinds.push_back(PhaseKind::kGruN);
  if (spec.proj_size > 0) kinds.push_back(PhaseKind::kProjection);
  return kinds;
}

// Final states by batch index: sorted row k's last step wrote parity len % 2 (the initial
// state if 0).
void StoreFinalStates(int64_t B, int H, int Hp, bool lstm, const RecurrentKernel::Scratch& s,
                      float* h_out, float* c_out) {
  for (int64_t k = 0; k < B; ++k) {
    const int b = s.order[k];
    std::copy_n(s.h[s.len[k] & 1].data() + k * Hp, Hp, h_out + b * Hp);
    if (lstm && c_out) std::copy_n(s.c.data() + k * H, H, c_out + b * H);
  }
}

}  // namespace

void RecurrentKernel::RunDirection(int d, const Tensor& x, absl::Span<const int32_t> lengths,
                                   const uint8_t* step_mask, const float* h0, const float* c0,
                                   float* seq_out, float* h_out, float* c_out, bool continues,
                                   StopCheck* stop) {
  const RecurrentDirection& dir = spec_.directions[d];
  Scratch& s = *scratch_;
  const int64_t B = x.dim(0), T = x.dim(1), I = x.dim(2);
  const int H = spec_.hidden_size, Hp = spec_.output_size(), G = spec_.gates();
  const bool lstm = spec_.cell == CellType::kLstm;

  // Rows of the valid steps: sequence b's steps are rows offset[b] .. offset[b] + len - 1.
  Reserve(B, 0);
  const int64_t rows = SetRowOffsets(lengths, s);
  Reserve(B, rows);
  // The valid steps of every sequence, packed contiguous when some sequence is short; each
  // thread projects them onto its own gate slice inside the parallel region below.
  const bool full = std::all_of(lengths.begin(), lengths.end(), [&](int32_t l) { return l == T; });
  const float* xin = full || rows == 0 ? x.f32() : PackValidRows(x, lengths, s);
  SortRowsByLength(lengths, step_mask, T, dir.reverse, s);
  LoadInitialStates(B, H, Hp, lstm, h0, c0, s);

  const DirectionRun run{
      .spec = spec_,
      .dir = dir,
      .s = s,
      .step_mask = step_mask,
      .seq_out = seq_out,
      .T = T,
      .B = B,
      .rows = rows,
      .H = H,
      .Hp = Hp,
      .G = G,
      .zero_masked = spec_.masking == MaskSemantics::kKeras && spec_.zero_output_for_mask,
      .continues = continues,
      .clip = spec_.clip,
      .peep = dir.peephole.empty() ? nullptr : dir.peephole.data(),
      .stop = stop,
  };

  if (UsesRowSplit(B)) {
    RunRows(d, run, xin, I);
  } else {
    RunUnits(d, run, xin, I);
  }
  if (stop != nullptr) stop->EndDirection();
  StoreFinalStates(B, H, Hp, lstm, s, h_out, c_out);
  if (seq_out) FillUnwrittenOutputs(spec_, dir, lengths, T, Hp, h_out, seq_out, continues);
}

void RecurrentKernel::RunUnits(int d, const DirectionRun& run, const float* xin, int64_t I) {
  const Packed& pk = packed_[d];
  Scratch& s = run.s;
  const int64_t B = run.B, rows = run.rows, max_len = B > 0 ? s.len[0] : 0;
  const int H = run.H, Hp = run.Hp, G = run.G;
  // The work of a run is a sequence of phases: the input projection, then per step the main
  // matmul with its pointwise update, GRU reset_after=false's n gate and LSTM projection. Each
  // phase has one task per unit slice; a phase starts when every task of the previous one is
  // done. Threads take their own slice first and any slice left over, so a thread the OS has
  // descheduled does not stall the others.
  const std::vector<PhaseKind> kinds = StepPhases(spec_);
  const int per_step = static_cast<int>(kinds.size());
  // A step too small to share runs on one thread, which takes every slice in turn: below
  // ~64K multiply-adds per step the hand-off between threads costs more than the work it
  // splits (an H=32 LSTM at B=1 has 4K; H=128 has 64K and is faster on two threads).
  const int64_t step_work = B * G * static_cast<int64_t>(H) * Hp;
  const int threads = step_work >= kMinSharedStepWork ? num_threads_ : 1;
  PhaseRunner runner(num_threads_, 1 + max_len * per_step);

  auto task = [&](int tid, int64_t phase) {
    const int u0 = unit_begin_[tid], p0 = proj_begin_[tid];
    const int64_t st = phase == 0 ? 0 : (phase - 1) / per_step;
    const SliceStep t{
        .sl = pk.slices[tid],
        .u0 = u0,
        .nu = unit_begin_[tid + 1] - u0,
        .p0 = p0,
        .np = proj_begin_[tid + 1] - p0,
        .gates = s.gates[tid].data(),
        .xproj = s.xproj[tid].data(),
        .st = st,
        .k0 = 0,
        .n = phase == 0 ? 0 : s.active[st],
        .hp = s.h[st & 1].data(),
        .hn = s.h[(st + 1) & 1].data(),
        .gemm = &s.gemm[tid],
    };
    if (phase == 0) return ProjectInputs(t, xin, rows, I, G);
    if (run.stop != nullptr) {
      // Slice 0 asks at the start of each step (one task per slice and phase, and the phases
      // one after another: one thread at a time); once stopped, no task does more work.
      if (tid == 0 && (phase - 1) % per_step == 0) {
        if (run.stop->AtStep(st)) return;
        run.stop->Ran(st + 1);
      } else if (run.stop->stopped()) {
        return;
      }
    }
    switch (kinds[(phase - 1) % per_step]) {
      case PhaseKind::kMain:
        return MainPhase(run, t);
      case PhaseKind::kGruN:
        return GruNewStateStep(run, t);
      case PhaseKind::kProjection:
        return ProjectionStep(run, t);
    }
  };

  if (threads > 1) {
    // Each participant of the team (work_team.h) works the phases as runner thread i; one that
    // has not woken when the others have done every phase never joins, so nobody waits for a
    // thread the OS has not scheduled (an OpenMP region's join did, for milliseconds a run on a
    // busy machine).
    team_->Run(threads, [&](int, int64_t i) { runner.Work(static_cast<int>(i), task); });
  } else {
    runner.Work(0, task);  // no parallel region: entering one costs an allocation per call
  }
}

}  // namespace rnnserve::engine::cpu
