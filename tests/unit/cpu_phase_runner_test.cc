// The recurrent kernel's phase runner (engine/cpu/phase_runner.h) on a team of plain threads:
// every task runs once, and a task of phase p sees everything phase p - 1 wrote. The kernel
// runs it on its WorkTeam's threads (engine/cpu/work_team.h); these tests drive it with
// std::thread, so the hand-off between phases is checked on its own (and under ThreadSanitizer).

#include "engine/cpu/phase_runner.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rnnserve::engine::cpu {
namespace {

// Each task of phase p checks every cell of row p - 1 (plain loads), then writes its own cell
// of row p (a plain store): a missing happens-before between phases is a stale value here and a
// race under TSan.
int64_t Cell(int64_t phase, int slice, int slices) { return phase * slices + slice + 1; }

void RunTeam(int slices, int64_t phases, int threads) {
  std::vector<std::vector<int64_t>> rows(phases, std::vector<int64_t>(slices, 0));
  std::vector<std::atomic<int>> runs(phases * slices);
  std::vector<std::atomic<int>> stale(phases * slices);  // cells of row p - 1 not yet written
  PhaseRunner runner(slices, phases);
  auto task = [&](int slice, int64_t phase) {
    runs[phase * slices + slice].fetch_add(1, std::memory_order_relaxed);
    if (phase > 0) {
      for (int s = 0; s < slices; ++s) {
        if (rows[phase - 1][s] != Cell(phase - 1, s, slices)) {
          stale[phase * slices + slice].fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    rows[phase][slice] = Cell(phase, slice, slices);
  };
  std::vector<std::thread> team;
  for (int tid = 1; tid < threads; ++tid) {
    team.emplace_back([&runner, &task, tid] { runner.Work(tid, task); });
  }
  runner.Work(0, task);
  for (std::thread& t : team) t.join();

  for (int64_t p = 0; p < phases; ++p) {
    for (int s = 0; s < slices; ++s) {
      ASSERT_EQ(runs[p * slices + s].load(), 1) << "phase " << p << " slice " << s;
      ASSERT_EQ(stale[p * slices + s].load(), 0) << "phase " << p << " slice " << s;
      ASSERT_EQ(rows[p][s], Cell(p, s, slices)) << "phase " << p << " slice " << s;
    }
  }
}

TEST(PhaseRunnerTest, EveryTaskRunsOnceAndSeesThePreviousPhase) { RunTeam(4, 64, 4); }

TEST(PhaseRunnerTest, FewerThreadsThanSlicesTakeTheUnclaimedSlices) { RunTeam(4, 64, 2); }

TEST(PhaseRunnerTest, OneThreadRunsEverySliceInTurn) { RunTeam(3, 16, 1); }

TEST(PhaseRunnerTest, ThreadsBeyondTheSlicesOnlyHelp) { RunTeam(2, 64, 4); }

}  // namespace
}  // namespace rnnserve::engine::cpu
