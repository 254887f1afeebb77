// Times a whole model file on the CPU engine, without gRPC, for bench/cpu_real_peers.py.
//
//   cpu_real_bench --model FILE --input X.npy [--reps N] [--threads N] [--dump OUT.npy]
//
// Loads the file as the server does (models/model_loader.h), compiles it for the input's batch
// size with `threads` threads and runs the batch reps times after 3 warm-up runs. Prints one
// line: `median_ms=... min_ms=... kernels=...` (kernels: what runs each recurrent layer, from the
// engine's placements). --dump writes the first output, for the peers script's agreement check.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/npy.h"
#include "engine/cpu/panel_gemm.h"
#include "engine/engine.h"
#include "models/model_loader.h"

namespace {

using Clock = std::chrono::steady_clock;

int Fail(const std::string& what) {
  std::fprintf(stderr, "%s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace e = rnnserve::engine;
  std::string model_file, input_file, dump;
  int reps = 20, threads = 1;
  CLI::App app("Times a model file on the CPU engine (bench/cpu_real_peers.py drives it)",
               "cpu_real_bench");
  app.add_option("--model", model_file, "model file (.h5, .keras, .onnx)")->required();
  app.add_option("--input", input_file, "X.npy: the batch, [B, T, F] float32")->required();
  app.add_option("--reps", reps, "timed runs (after 3 warm-up runs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--dump", dump, "write the first output here (.npy)");
  CLI11_PARSE(app, argc, argv);
  // RNNSERVE_CPU_KERNELS forces a kernel set, as it does in the server (before any kernel runs).
  if (const char* kernels = std::getenv("RNNSERVE_CPU_KERNELS"); kernels != nullptr) {
    if (auto s = e::cpu::UseCpuKernelSet(kernels); !s.ok()) return Fail(std::string(s.message()));
  }
  auto model = rnnserve::models::LoadModelFile(model_file);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  auto x = rnnserve::client::ReadNpy(input_file);
  if (!x.ok()) return Fail(std::string(x.status().message()));
  auto engine = e::Engine::Create({});
  if (!engine.ok()) return Fail(std::string(engine.status().message()));
  const int batch = static_cast<int>(x->shape[0]);
  auto compiled = (*engine)->Compile(*model, {.num_threads = threads, .max_batch_size = batch});
  if (!compiled.ok()) return Fail(std::string(compiled.status().message()));
  e::Batch b;
  b.inputs.push_back(
      e::Tensor::Float(x->shape, std::vector<float>(x->values.begin(), x->values.end())));
  std::vector<e::Tensor> out;
  std::vector<double> ms;
  for (int r = 0; r < reps + 3; ++r) {
    const auto t0 = Clock::now();
    if (auto s = (*compiled)->Run(b, &out); !s.ok()) return Fail(std::string(s.message()));
    const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r >= 3) ms.push_back(t);  // the first runs size the scratch and warm the caches
  }
  std::sort(ms.begin(), ms.end());
  // Which split runs each recurrent layer at this batch (engine/cpu/recurrent.h), from the
  // placements: "rows", "units", or both with the batch size the row split starts at.
  std::string kernels;
  for (const auto& p : (*compiled)->placements()) {
    const bool rows = p.reason.find("row split") != std::string::npos;
    const bool units = p.reason.find("unit split") != std::string::npos;
    if (!rows && !units) continue;
    std::string which = rows ? "rows" : "units";
    if (rows && units) {
      const size_t at = p.reason.find("at batches of ");
      if (batch < std::atoi(p.reason.c_str() + at + 14)) which = "units";
    }
    kernels += (kernels.empty() ? "" : ",") + p.layer + ":" + which;
  }
  std::printf("median_ms=%.4f min_ms=%.4f kernels=%s\n", ms[ms.size() / 2], ms.front(),
              kernels.empty() ? "-" : kernels.c_str());
  if (!dump.empty()) {
    const auto& y = out[0];
    const std::string npy = rnnserve::client::SerializeNpyFloat32(
        y.shape(), std::vector<float>(y.floats().begin(), y.floats().end()));
    FILE* f = std::fopen(dump.c_str(), "wb");
    if (f == nullptr) return Fail("cannot write " + dump);
    std::fwrite(npy.data(), 1, npy.size(), f);
    std::fclose(f);
  }
  return 0;
}
