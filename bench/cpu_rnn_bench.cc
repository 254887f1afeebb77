// Times one recurrent layer on the CPU engine, for bench/cpu_peers.sh.
//
//   cpu_rnn_bench --case FILE.npz --cell lstm|gru [--reps N] [--threads N]
//                 [--weights fp32|bf16|int8]
//   cpu_rnn_bench --bandwidth [--threads N]
//   cpu_rnn_bench --gemm
//
// The case file (written by bench/cpu_peers.py) holds W [G*H, I], R [G*H, H], bW, bR in the
// canonical layout and x [B, T, I]; every peer runs the same weights and input. Prints one
// line: `median_ms=... min_ms=... bytes=...` (bytes: what the compiled instance holds).
// --bandwidth prints the machine's read bandwidth over a 1 GiB buffer: `read_gbps=...`.
// --gemm prints one line per GEMM shape of the recurrent kernel, single-threaded GFLOP/s of
// our panel GEMM and of Eigen's, measured in thread CPU time (robust on a shared machine).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <CLI/CLI.hpp>
#include <Eigen/Core>

#include "client/npy.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Bandwidth(int threads) {
  const size_t n = size_t{1} << 28;  // 1 GiB of floats
  std::vector<float> buf(n, 1.0f);
  std::vector<double> gbps;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = Clock::now();
    float total = 0.0f;
    const size_t chunk = size_t{1} << 16;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static)
    for (size_t i = 0; i < n; i += chunk) {
      total += Eigen::Map<const Eigen::ArrayXf>(buf.data() + i, chunk).sum();  // vectorised
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (total < 0) std::printf("impossible\n");
    gbps.push_back(n * sizeof(float) / sec / 1e9);
  }
  std::printf("read_gbps=%.2f\n", Median(gbps));
  return 0;
}

double ThreadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int Gemm() {
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  // [m, k] x [k, n]: input projection (B*T rows), the B=64 step, the B=1 step.
  const int shapes[][3] = {{6400, 2048, 512}, {64, 1024, 512}, {1, 1024, 512}};
  for (const auto& sh : shapes) {
    const int m = sh[0], n = sh[1], k = sh[2];
    RowMat a = RowMat::Random(m, k), b = RowMat::Random(n, k), c(m, n);
    const auto panels = rnnserve::engine::cpu::PackPanels(b.data(), k, n, k);
    const int reps = m > 1000 ? 3 : 300;
    auto time = [&](auto&& fn) {
      fn();
      const double t0 = ThreadSeconds();
      for (int r = 0; r < reps; ++r) fn();
      return 2.0 * m * n * k * reps / (ThreadSeconds() - t0) / 1e9;
    };
    const double ours = time([&] {
      rnnserve::engine::cpu::PanelGemm(a.data(), k, m, k, panels.data(), n, c.data(), n);
    });
    Eigen::setNbThreads(1);
    const double eigen = time([&] { c.noalias() = a * b.transpose(); });
    std::printf("gemm m=%d n=%d k=%d ours_gflops=%.1f eigen_gflops=%.1f\n", m, n, k, ours, eigen);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file, cell = "lstm", weights = "fp32";
  int reps = 20, threads = 0;
  bool bandwidth = false, gemm = false;
  CLI::App app("Times one recurrent layer on the CPU engine (bench/cpu_peers.sh drives it)",
               "cpu_rnn_bench");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--case", file, "FILE.npz: W, R, bW, bR and x, written by bench/cpu_peers.py");
  app.add_option("--cell", cell, "the case's cell")
      ->check(CLI::IsMember({"lstm", "gru"}))
      ->capture_default_str();
  app.add_option("--reps", reps, "timed runs (after 3 warm-up runs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: the engine's default; --bandwidth: 2)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--weights", weights, "how the recurrent weights are stored (cpu_weights)")
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}))
      ->capture_default_str();
  app.add_flag("--bandwidth", bandwidth, "print the read bandwidth over a 1 GiB buffer instead");
  app.add_flag("--gemm", gemm,
               "print single-threaded GFLOP/s of each recurrent GEMM shape instead");
  try {
    app.parse(argc, argv);
    if (!bandwidth && !gemm && file.empty()) throw CLI::RequiredError("--case");
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // RNNSERVE_CPU_KERNELS forces a kernel set, as it does in the server (before any kernel runs).
  if (const char* kernels = std::getenv("RNNSERVE_CPU_KERNELS"); kernels != nullptr) {
    if (auto s = rnnserve::engine::cpu::UseCpuKernelSet(kernels); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  if (gemm) return Gemm();
  if (bandwidth) return Bandwidth(threads > 0 ? threads : 2);
  auto arrays = rnnserve::client::ReadNpz(file);
  if (!arrays.ok()) {
    std::fprintf(stderr, "%s\n", std::string(arrays.status().message()).c_str());
    return 1;
  }
  auto floats = [&](const char* k) {
    const auto& a = arrays->at(k);
    return std::vector<float>(a.values.begin(), a.values.end());
  };
  namespace e = rnnserve::engine;
  e::RecurrentSpec spec;
  spec.cell = cell == "gru" ? e::CellType::kGru : e::CellType::kLstm;
  const auto& x = arrays->at("x");
  spec.input_size = static_cast<int>(x.shape[2]);
  spec.hidden_size = static_cast<int>(arrays->at("R").shape[1]);
  spec.return_sequences = true;
  spec.directions.push_back({});
  auto& d = spec.directions[0];
  d.W = floats("W");
  d.R = floats("R");
  d.bW = floats("bW");
  d.bR = floats("bR");
  e::Model m;
  m.name = "bench";
  m.inputs.push_back({"x", e::DType::kFloat32, {-1, -1, spec.input_size}});
  m.layers.push_back({"rnn", cell, spec, {0}, {1}});
  m.outputs.push_back({"y", e::DType::kFloat32, {}});
  m.output_values = {1};
  m.num_values = 2;
  auto engine = e::Engine::Create({});
  const int batch = static_cast<int>(x.shape[0]);
  const e::CpuWeights mode = weights == "bf16"   ? e::CpuWeights::kBf16
                             : weights == "int8" ? e::CpuWeights::kInt8
                                                 : e::CpuWeights::kFp32;
  auto compiled =
      (*engine)->Compile(m, {.num_threads = threads, .cpu_weights = mode, .max_batch_size = batch});
  if (!compiled.ok()) {
    std::fprintf(stderr, "%s\n", std::string(compiled.status().message()).c_str());
    return 1;
  }
  e::Batch b;
  b.inputs.push_back(e::Tensor::Float(x.shape, floats("x")));
  std::vector<e::Tensor> out;
  std::vector<double> ms;
  for (int r = 0; r < reps + 3; ++r) {
    const auto t0 = Clock::now();
    if (auto s = (*compiled)->Run(b, &out); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r >= 3) ms.push_back(t);  // the first runs size the scratch and warm the caches
  }
  // kernels: the set that ran (a refused one never gets here: the engine does not compile).
  const auto set = rnnserve::engine::cpu::ActiveCpuKernelSet();
  std::printf("median_ms=%.4f min_ms=%.4f bytes=%lld kernels=%s\n", Median(ms),
              *std::min_element(ms.begin(), ms.end()),
              static_cast<long long>((*compiled)->memory_bytes()),
              set.ok() ? rnnserve::engine::cpu::CpuKernelSetName(*set) : "none");
  if (const char* dump = std::getenv("RNNSERVE_BENCH_DUMP")) {
    // The output, for the peers script's agreement check.
    std::map<std::string, std::string> npy = {
        {"y",
         rnnserve::client::SerializeNpyFloat32(
             out[0].shape(), std::vector<float>(out[0].floats().begin(), out[0].floats().end()))}};
    if (auto s = rnnserve::client::WriteNpz(dump, npy); !s.ok()) return 1;
  }
  return 0;
}
