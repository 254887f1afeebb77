#pragma once

// One step of one recurrent cell kind on one thread's unit slice, for recurrent_direction.cc's
// step loop. Internal to engine/cpu.
//
// Rows are length-sorted (the rows still running at a step are a prefix); a thread owns the
// hidden units [u0, u0 + nu) of every row and, with an LSTM projection, the projected units
// [p0, p0 + np). The loop calls one function per phase: the cell kind is chosen once per step,
// never per element.

#include <algorithm>
#include <cstdint>

#include "engine/cpu/recurrent_internal.h"
#include "engine/cpu/stop_check.h"
#include "engine/ir.h"

namespace rnnserve::engine::cpu {

// One direction's run as each task sees it: the spec, the length-sorted rows and the buffers.
struct DirectionRun {
  const RecurrentSpec& spec;
  const RecurrentDirection& dir;
  RecurrentKernel::Scratch& s;
  const uint8_t* step_mask;  // [B, T] (1 = valid) or null
  float* seq_out;            // [B, T, H'] or null
  int64_t T;
  int64_t B;          // rows of the batch
  int64_t rows;       // valid steps of all rows (rows of the input projection)
  int H, Hp, G;       // hidden units, output units (H or proj), gates
  bool zero_masked;   // Keras zero_output_for_mask
  bool continues;     // Batch::continues: before the first valid step, repeat h, not zeros
  float clip;         // 0: none
  const float* peep;  // LSTM peepholes [3H] (i, f, o), or null
  StopCheck* stop;    // Batch::stop and the steps counted (stop_check.h), or null

  // Time index of sorted row k's step st (reversed directions walk back from the length).
  int64_t time_of(int64_t k, int64_t st) const { return dir.reverse ? s.len[k] - 1 - st : st; }
  // Position in the sequence output of sorted row k's step st.
  int64_t out_pos(int64_t k, int64_t st) const {
    const int64_t len = s.len[k];
    if (dir.outputs_in_processing_order) return (T - len) + st;
    return dir.reverse ? len - 1 - st : st;
  }
  // True when sorted row k's step st is masked inside its length (Keras step masks).
  bool masked(int64_t k, int64_t st) const {
    return step_mask && !step_mask[s.order[k] * T + time_of(k, st)];
  }
  // Writes h (units [a, a + m) of row k) to the sequence output.
  void emit(int64_t k, int64_t st, const float* h, int a, int m, bool was_masked) const {
    if (!seq_out) return;
    float* dst = seq_out + (s.order[k] * T + out_pos(k, st)) * Hp + a;
    // Keras: a masked step repeats the last output, which is zero before the first valid step
    // of a sequence (and the initial h before the first valid step of a continuing batch).
    if (was_masked && (zero_masked || (!continues && st < s.first_valid[k]))) {
      std::fill_n(dst, m, 0.0f);
    } else {
      std::copy_n(h, m, dst);
    }
  }
};

// One thread's slice at one step, over the running rows [k0, n): the unit split gives each
// thread every row (k0 = 0) and a slice of the units; the row split gives each thread a block
// of rows and every unit (recurrent_rows.cc).
struct SliceStep {
  const RecurrentKernel::Packed::Slice& sl;
  int u0, nu;         // hidden units [u0, u0 + nu)
  int p0, np;         // projected units [p0, p0 + np)
  float* gates;       // [n - k0, G*nu] this slice, gate-major; row k at k - k0
  float* xproj;       // [rows, G*nu] input projection of this slice, biases folded in
  int64_t st;         // the step
  int k0;             // first row
  int n;              // rows still running: [k0, n)
  const float* hp;    // [n, H'] state before the step
  float* hn;          // [n, H'] state after the step
  GemmScratch* gemm;  // this slice's scratch for its weights' conversions of A

  // Row k's gates [G*nu].
  float* g(const DirectionRun& r, int64_t k) const { return gates + (k - k0) * r.G * nu; }
  // Row k's input projection at step st.
  const float* xp(const DirectionRun& r, int64_t k) const {
    return xproj + (r.s.offset[r.s.order[k]] + r.time_of(k, st)) * (r.G * nu);
  }
};

// The input projection of every valid step (`rows` of `xin` [rows, I]) onto the slice's gates.
void ProjectInputs(const SliceStep& t, const float* xin, int64_t rows, int64_t I, int G);

// gates [n, G*nu] = h [n, H'] . R_slice^T (GRU reset_after=false: the r and z columns only).
void RecurrentMatmul(const DirectionRun& r, const SliceStep& t);

// The pointwise updates after RecurrentMatmul, one per cell kind. An LSTM with a projection
// leaves o * h(c) in s.shared for ProjectionStep; GRU reset_after=false leaves r * h there
// for GruNewStateStep.
void LstmStep(const DirectionRun& r, const SliceStep& t);
void GruResetAfterStep(const DirectionRun& r, const SliceStep& t);
void GruResetBeforeGatesStep(const DirectionRun& r, const SliceStep& t);
void SimpleRnnStep(const DirectionRun& r, const SliceStep& t);

// The main phase of a step: the recurrent matmul, then the cell's pointwise update.
void MainPhase(const DirectionRun& r, const SliceStep& t);

// GRU reset_after=false's second phase: n = g(x_n + (r * h) R_n^T), h = (1 - z) n + z h.
void GruNewStateStep(const DirectionRun& r, const SliceStep& t);

// LSTM projection: h = P . (o * h(c)), the slice's projected units.
void ProjectionStep(const DirectionRun& r, const SliceStep& t);

}  // namespace rnnserve::engine::cpu
