// The row split of a recurrent layer's direction (recurrent.h): each thread claims a block of
// the length-sorted rows and runs it alone from the input projection to the last step, with
// every unit's weights in one slice (Packed::all_units). The step functions are the unit
// split's (recurrent_steps.cc) over the rows [k0, n) of the block and all units; a step is
// the block's recurrent matmul against R (hot in this core's L1/L2 from step to step) and the
// pointwise update of the same rows, with no barrier and no parallel region per step. The
// blocks go to the kernel's WorkTeam, whose caller never waits for a helper that has not woken.

#include <algorithm>

#include "engine/cpu/recurrent.h"
#include "engine/cpu/recurrent_internal.h"
#include "engine/cpu/recurrent_steps.h"
#include "engine/cpu/work_team.h"

namespace rnnserve::engine::cpu {
namespace {

template <typename T, typename A>
void Grow(std::vector<T, A>* v, size_t n) {
  if (v->size() < n) v->resize(n);
}

// Blocks of sorted rows: with several threads, two blocks per thread (at least one row each),
// claimed longest first, so a thread the OS has descheduled leaves its second block to the
// others. begin[i] .. begin[i + 1] is block i.
std::vector<int64_t> RowBlocks(int64_t B, int threads) {
  const int64_t blocks = threads == 1 ? 1 : std::min<int64_t>(B, 2 * threads);
  std::vector<int64_t> begin(blocks + 1);
  for (int64_t i = 0; i <= blocks; ++i) begin[i] = B * i / blocks;
  return begin;
}

// Block [k0, k1)'s input projection, biases folded in: sequences adjacent in the packed input
// (adjacent batch indices) go through one GEMM.
void ProjectBlock(const DirectionRun& r, const SliceStep& base, const float* xin, int64_t I,
                  int64_t k0, int64_t k1) {
  const RecurrentKernel::Scratch& s = r.s;
  const int64_t Gn = static_cast<int64_t>(r.G) * base.nu;
  for (int64_t k = k0; k < k1;) {
    const int64_t first = s.offset[s.order[k]];
    int64_t rows = s.len[k];
    int64_t e = k + 1;
    while (e < k1 && s.order[e] == s.order[e - 1] + 1) rows += s.len[e++];
    SliceStep t = base;
    t.xproj = base.xproj + first * Gn;
    ProjectInputs(t, xin + first * I, rows, I, r.G);
    k = e;
  }
}

}  // namespace

void RecurrentKernel::RunRows(int d, const DirectionRun& run, const float* xin, int64_t I) {
  const Packed::Slice& sl = packed_[d].all_units();
  Scratch& s = run.s;
  const int64_t B = run.B;
  if (B == 0) return;
  const int Gn = run.G * run.H;
  const int threads = static_cast<int>(std::min<int64_t>(num_threads_, B));
  Grow(&s.xproj_all, static_cast<size_t>(run.rows) * Gn);
  s.row_gates.resize(num_threads_);
  const std::vector<int64_t> blocks = RowBlocks(B, threads);
  // A block's share of the shared gates buffer is only its rows: row k at k - k0. Any worker
  // of the team may claim a block (work_team.h), not only the first `threads`.
  for (int t = 0; t < num_threads_; ++t) Grow(&s.row_gates[t], static_cast<size_t>(B) * Gn);
  const bool gru_n = spec_.cell == CellType::kGru && !spec_.reset_after;
  const bool projected = spec_.proj_size > 0;

  auto block = [&](int tid, int64_t k0, int64_t k1) {
    SliceStep t{
        .sl = sl,
        .u0 = 0,
        .nu = run.H,
        .p0 = 0,
        .np = run.Hp,
        .gates = s.row_gates[tid].data(),
        .xproj = s.xproj_all.data(),
        .st = 0,
        .k0 = static_cast<int>(k0),
        .n = static_cast<int>(k0),
        .hp = nullptr,
        .hn = nullptr,
        .gemm = &s.gemm[tid],
    };
    ProjectBlock(run, t, xin, I, k0, k1);
    int64_t st = 0;
    for (; st < s.len[k0]; ++st) {
      if (run.stop != nullptr && run.stop->AtStep(st)) break;
      // The rows of the block still running: sorted by length, a prefix of it.
      t.st = st;
      t.n = static_cast<int>(std::min<int64_t>(k1, s.active[st]));
      t.hp = s.h[st & 1].data();
      t.hn = s.h[(st + 1) & 1].data();
      MainPhase(run, t);
      if (gru_n) GruNewStateStep(run, t);
      if (projected) ProjectionStep(run, t);
    }
    if (run.stop != nullptr) run.stop->Ran(st);
  };

  const int64_t num_blocks = static_cast<int64_t>(blocks.size()) - 1;
  // The caller and the team's helpers claim blocks (work_team.h); one block: the caller alone.
  team_->Run(num_blocks, [&](int worker, int64_t i) { block(worker, blocks[i], blocks[i + 1]); });
}

}  // namespace rnnserve::engine::cpu
