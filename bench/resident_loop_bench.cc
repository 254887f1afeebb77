// The resident step loop (engine/cuda/resident_loop.h) on one GPU: the cost of one step by the
// number of active slots (timed while all of them are active: sequences of 2000 steps, from the
// last one taken to the first one done), admission (Join called to the kernel taking the
// sequence, and to its first step done), and a one-step sequence's Join-to-Done, unloaded and
// with most slots busy on sequences of 10..500 steps. A random LSTM or GRU layer; prints one
// table.
//
// usage: resident_loop_bench [--cell lstm|gru] [--input 64] [--hidden 256] [--slots 64]
//                            [--trials 300] [--per-step 1 (0: only final states reach the host)]
//                            [--units 0 (hidden units a block; 0: the loop's default)]
//                            [--register 1 (0: the shared-memory kernel)]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/resident_loop.h"

namespace {

using Clock = std::chrono::steady_clock;
using rnnserve::engine::CellType;
using rnnserve::engine::RecurrentDirection;
using rnnserve::engine::RecurrentSpec;
using rnnserve::engine::cuda::ResidentLoop;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

struct Stats {
  std::vector<double> v;
  double P(double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
  }
};

RecurrentSpec RandomSpec(CellType cell, int I, int H, std::mt19937& rng) {
  RecurrentSpec spec;
  spec.cell = cell;
  spec.input_size = I;
  spec.hidden_size = H;
  const int G = spec.gates();
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  auto fill = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  RecurrentDirection d;
  d.W = fill(size_t(G) * H * I);
  d.R = fill(size_t(G) * H * H);
  d.bW = fill(size_t(G) * H);
  d.bR = fill(size_t(G) * H);
  spec.directions.push_back(std::move(d));
  return spec;
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  CellType cell = CellType::kLstm;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--cell") == 0 && std::strcmp(argv[i + 1], "gru") == 0) {
      cell = CellType::kGru;
    }
  }
  const int I = Arg(argc, argv, "--input", 64), H = Arg(argc, argv, "--hidden", 256);
  const int slots = Arg(argc, argv, "--slots", 64), trials = Arg(argc, argv, "--trials", 300);
  const int max_steps = 2000, max_len = 500;  // the loop's longest; admission's sequences
  const bool per_step = Arg(argc, argv, "--per-step", 1) != 0;
  std::mt19937 rng(1);
  auto loop = ResidentLoop::Create(RandomSpec(cell, I, H, rng),
                                   {.capacity = slots,
                                    .max_steps = max_steps,
                                    .per_step_outputs = per_step,
                                    .units_per_block = Arg(argc, argv, "--units", 0),
                                    .register_kernel = Arg(argc, argv, "--register", 1) != 0});
  if (!loop.ok()) {
    std::fprintf(stderr, "%s\n", loop.status().ToString().c_str());
    return 1;
  }
  ResidentLoop& l = **loop;
  std::printf("resident loop: %s I=%d H=%d slots=%d blocks=%d, %s, %s\n",
              cell == CellType::kLstm ? "LSTM" : "GRU", I, H, slots, l.blocks(),
              l.register_kernel()   ? "register kernel (R in registers)"
              : l.weights_in_smem() ? "shared-memory kernel (W, R in shared memory)"
                                    : "shared-memory kernel (W, R from L2)",
              per_step ? "h of every step to the host" : "final states only to the host");
  std::vector<float> x(static_cast<size_t>(max_steps) * I);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  auto wait = [&](int slot) {
    while (!l.Done(slot)) {
    }
  };

  // Step time by active slots: k sequences of max_steps joined one after another. Timed from
  // the last one taken to the first one done (slot 0, joined first), when all k are active;
  // also the whole run over its steps (the joins' ramp included) and the mean Join call.
  std::printf("\nactive  us/step  (steps timed)  us/step_whole_run  (steps)  join_call_us\n");
  for (int k : {1, 8, 16, 32, 64}) {
    if (k > slots) break;
    const uint64_t s0 = l.steps();
    const auto t0 = Clock::now();
    for (int s = 0; s < k; ++s) (void)l.Join(s, x.data(), max_steps);
    const auto joined = Clock::now();
    for (int s = 0; s < k; ++s) {
      while (!l.Started(s)) {
      }
    }
    const auto ta = Clock::now();
    const uint64_t sa = l.steps();
    wait(0);
    const auto tb = Clock::now();
    const uint64_t sb = l.steps();
    for (int s = 0; s < k; ++s) wait(s);
    const double whole = Us(Clock::now() - t0);
    const uint64_t steps = l.steps() - s0;
    std::printf("%6d  %7.2f  (%5llu)  %7.2f  (%5llu)  %6.1f\n", k,
                sb > sa ? Us(tb - ta) / static_cast<double>(sb - sa) : 0.0,
                static_cast<unsigned long long>(sb > sa ? sb - sa : 0),
                whole / static_cast<double>(steps), static_cast<unsigned long long>(steps),
                Us(joined - t0) / k);
  }

  // Admission and completion of one-step sequences in slot 0, with `busy` other slots running
  // sequences of 10..500 steps (refilled as they finish).
  std::uniform_int_distribution<int> len(10, max_len);
  std::printf(
      "\nbusy  join_call_p50/p99  started_p50/p99  done_len1_p50/p99  (us from Join called)\n");
  for (int busy : {0, slots * 3 / 4}) {
    Stats call, started, done;
    std::vector<bool> running(slots, false);
    for (int t = 0; t < trials; ++t) {
      for (int s = 1; s <= busy && s < slots; ++s) {
        if (!running[s] || l.Done(s)) {
          (void)l.Join(s, x.data(), len(rng));
          running[s] = true;
        }
      }
      const auto t0 = Clock::now();
      if (!l.Join(0, x.data(), 1).ok()) return 1;
      const auto t1 = Clock::now();
      while (!l.Started(0)) {
      }
      const auto t2 = Clock::now();
      wait(0);
      const auto t3 = Clock::now();
      call.v.push_back(Us(t1 - t0));
      started.v.push_back(Us(t2 - t0));
      done.v.push_back(Us(t3 - t0));
    }
    std::printf("%4d  %7.1f / %7.1f   %6.1f / %6.1f   %6.1f / %6.1f\n", busy, call.P(0.5),
                call.P(0.99), started.P(0.5), started.P(0.99), done.P(0.5), done.P(0.99));
    for (int s = 1; s < slots; ++s) {
      if (running[s]) wait(s);
    }
  }
  return 0;
}
