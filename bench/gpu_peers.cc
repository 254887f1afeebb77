// Times the GPU engine on recurrent stacks whose weights PyTorch wrote (bench/gpu_peers.py
// drives it and times PyTorch on the same weights in the same run).
//
//   gpu_peers MANIFEST RESULTS
//
// MANIFEST: one case a line, "name cell I H layers bidirectional B T math weights.npz x.npy
// out.npy" (cell lstm|gru; math fp32|tf32|fp16|bf16; weights: PyTorch's state_dict names).
// For each case, on one stream, after warm-up, timed with CUDA events (median of REPS):
//   - the layer stack on device buffers: with the algorithm the engine chose, eagerly, replayed
//     from one CUDA graph of the stack, and as the engine runs it (a graph per layer for batches
//     up to 64); then eagerly once per algorithm cuDNN accepts;
//   - CompiledModel::Run end to end (host input in, host output out; host clock), with the
//     input in pageable memory and in the engine's page-locked host tensor, beside the PCIe
//     floor of that input and output at the pinned bandwidth measured first.
// RESULTS gets a line "pcie h2d_gbps=.. d2h_gbps=..", then one line a case: name key=value ...;
// out.npy the engine's output [B, T, dirs*H].

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "engine/cuda/cuda_model.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::bench {
namespace {

using engine::cuda::CudaOk;
using engine::cuda::CudnnRecurrent;
using engine::cuda::DeviceBuffer;
using engine::cuda::LaunchSwap01;

constexpr int kWarmup = 20;
constexpr int kReps = 60;

struct Case {
  std::string name, cell;
  int I = 0, H = 0, layers = 1, bidir = 0, B = 0, T = 0;
  std::string math, weights, x, out;
};

engine::MathMode ParseMath(const std::string& m) {
  if (m == "tf32") return engine::MathMode::kTf32;
  if (m == "fp16") return engine::MathMode::kFp16;
  if (m == "bf16") return engine::MathMode::kBf16;
  return engine::MathMode::kFp32;
}

std::vector<float> Floats(const client::NpyArray& a) {
  return std::vector<float>(a.values.begin(), a.values.end());
}

// PyTorch's stacked module as a chain of IR layers returning the last layer's sequence.
engine::Model ModelFrom(const Case& c, const std::map<std::string, client::NpyArray>& sd) {
  engine::Model m;
  m.inputs.push_back({"x", engine::DType::kFloat32, {-1, -1, c.I}});
  const int dirs = c.bidir ? 2 : 1;
  for (int l = 0; l < c.layers; ++l) {
    engine::RecurrentSpec spec;
    spec.cell = c.cell == "gru" ? engine::CellType::kGru : engine::CellType::kLstm;
    spec.input_size = l == 0 ? c.I : dirs * c.H;
    spec.hidden_size = c.H;
    spec.return_sequences = true;
    spec.masking = engine::MaskSemantics::kOnnx;
    for (int d = 0; d < dirs; ++d) {
      const std::string sfx = absl::StrCat("_l", l, d ? "_reverse" : "");
      engine::RecurrentDirection dir;
      dir.reverse = d == 1;
      dir.W = Floats(sd.at("weight_ih" + sfx));
      dir.R = Floats(sd.at("weight_hh" + sfx));
      dir.bW = Floats(sd.at("bias_ih" + sfx));
      dir.bR = Floats(sd.at("bias_hh" + sfx));
      spec.directions.push_back(std::move(dir));
    }
    m.layers.push_back({absl::StrCat("l", l), "torch", spec, {l}, {l + 1}});
  }
  m.output_values = {c.layers};
  m.outputs.resize(1);
  m.num_values = c.layers + 1;
  return m;
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1.0f : v[v.size() / 2];
}

// Median of kReps event-timed calls of fn (after kWarmup), in ms; -1 on any error.
template <typename Fn>
float TimeIt(cudaStream_t stream, Fn fn) {
  for (int i = 0; i < kWarmup; ++i) {
    if (!fn().ok()) return -1.0f;
  }
  std::vector<cudaEvent_t> ev(2 * kReps);
  for (auto& e : ev) cudaEventCreate(&e);
  bool ok = true;
  for (int i = 0; i < kReps && ok; ++i) {
    cudaEventRecord(ev[2 * i], stream);
    ok = fn().ok();
    cudaEventRecord(ev[2 * i + 1], stream);
  }
  ok = ok && cudaStreamSynchronize(stream) == cudaSuccess;
  std::vector<float> ms(kReps);
  for (int i = 0; i < kReps && ok; ++i) cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]);
  for (auto& e : ev) cudaEventDestroy(e);
  return ok ? Median(ms) : -1.0f;
}

// Pinned host memory to the device and back, bytes per second: the PCIe floor of host IO.
struct Link {
  double h2d_bytes_per_s = 0, d2h_bytes_per_s = 0;
};

absl::StatusOr<Link> MeasureLink() {
  constexpr size_t kBytes = size_t{256} << 20;
  void* host = nullptr;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaHostAlloc(&host, kBytes, 0), "cudaHostAlloc"));
  std::unique_ptr<void, cudaError_t (*)(void*)> free_host(host, cudaFreeHost);
  std::memset(host, 1, kBytes);
  DeviceBuffer dev;
  RNNSERVE_RETURN_IF_ERROR(dev.Reserve(kBytes));
  cudaStream_t stream = nullptr;
  RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamCreate(&stream), "cudaStreamCreate"));
  auto seconds = [&](bool h2d) {
    return TimeIt(
               stream,
               [&]() {
                 return CudaOk(
                     cudaMemcpyAsync(h2d ? dev.get() : host, h2d ? host : dev.get(), kBytes,
                                     h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, stream),
                     "cudaMemcpyAsync");
               }) /
           1e3;
  };
  Link link{kBytes / seconds(true), kBytes / seconds(false)};
  cudaStreamDestroy(stream);
  return link;
}

absl::Status RunCase(const Case& c, const Link& link, std::ostream& results) {
  auto sd = client::ReadNpz(c.weights);
  if (!sd.ok()) return sd.status();
  auto xa = client::ReadNpy(c.x);
  if (!xa.ok()) return xa.status();
  const engine::Model model = ModelFrom(c, *sd);
  const engine::MathMode math = ParseMath(c.math);
  const int dirs = c.bidir ? 2 : 1;
  std::ostringstream line;
  line << c.name;

  // 1. The recurrent stack on device buffers, as the engine runs it.
  cudaStream_t stream;
  cudnnHandle_t handle;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"));
  cudnnCreate(&handle);
  cudnnSetStream(handle, stream);
  using Stack = std::vector<std::unique_ptr<CudnnRecurrent>>;
  auto make_stack = [&](Stack* stack) -> absl::Status {
    for (const auto& layer : model.layers) {
      auto r = CudnnRecurrent::Create(std::get<engine::RecurrentSpec>(layer.spec), layer.name, math,
                                      handle, stream);
      if (!r.ok()) return r.status();
      stack->push_back(std::move(*r));
    }
    return absl::OkStatus();
  };
  Stack layers;
  RNNSERVE_RETURN_IF_ERROR(make_stack(&layers));
  const int64_t x_n = int64_t{c.B} * c.T * c.I, y_n = int64_t{c.B} * c.T * dirs * c.H;
  // Every layer its own y, hy and cy (the layers of a stacked launch write theirs at once); at
  // least two y for the transpose timed below.
  const size_t n_layers = layers.size();
  DeviceBuffer x, hy, cy, lens;
  std::vector<DeviceBuffer> y(std::max<size_t>(n_layers, 2));
  RNNSERVE_RETURN_IF_ERROR(x.Reserve(x_n * 4));
  for (auto& b : y) RNNSERVE_RETURN_IF_ERROR(b.Reserve(y_n * 4));
  RNNSERVE_RETURN_IF_ERROR(hy.Reserve(int64_t{1} * n_layers * dirs * c.B * c.H * 4));
  RNNSERVE_RETURN_IF_ERROR(cy.Reserve(int64_t{1} * n_layers * dirs * c.B * c.H * 4));
  RNNSERVE_RETURN_IF_ERROR(lens.Reserve(c.B * 4));
  const std::vector<float> xf = Floats(*xa);
  const std::vector<int32_t> lengths(c.B, c.T);
  cudaMemcpy(x.get(), xf.data(), x_n * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(lens.get(), lengths.data(), c.B * 4, cudaMemcpyHostToDevice);
  // Layer l reads y[l - 1] (x for the first) and writes y[l] and its part of hy, cy; the layers
  // run through ForwardStack (runs of layers in one launch where that is faster).
  auto layer_io = [&](size_t l) {
    const int64_t states = int64_t{dirs} * c.B * c.H * static_cast<int64_t>(l);
    return engine::cuda::RecurrentIO{.B = c.B,
                                     .T = c.T,
                                     .lengths = lengths,
                                     .lengths_dev = lens.as<int32_t>(),
                                     .x = l == 0 ? x.as<float>() : y[l - 1].as<float>(),
                                     .y = y[l].as<float>(),
                                     .hy = hy.as<float>() + states,
                                     .cy = cy.as<float>() + states};
  };
  auto run = [&](Stack& stack) -> absl::Status {
    if (stack.size() == 1) return stack[0]->Forward(layer_io(0));
    std::vector<CudnnRecurrent::StackEntry> entries;
    for (size_t l = 0; l < stack.size(); ++l) entries.push_back({stack[l].get(), layer_io(l)});
    return CudnnRecurrent::ForwardStack(entries);
  };
  // The algorithm of the first layer, and how the stack ran (runs of layers, or apart).
  auto algo_of = [&](const Stack& stack) {
    std::string runs = stack.size() > 1 ? stack[0]->StackFor(c.B, c.T) : "";
    std::replace(runs.begin(), runs.end(), ' ', '_');
    return stack[0]->AlgorithmFor(c.B, c.T) + (runs.empty() ? "" : "," + runs);
  };
  auto forward = [&]() { return run(layers); };
  // Eagerly first (the comparison with PyTorch eager); the algorithm is chosen in warm-up.
  for (auto& l : layers) l->set_use_graphs(false);
  const float auto_ms = TimeIt(stream, forward);
  line << " auto_ms=" << auto_ms << " auto_algo=" << algo_of(layers);
  if (const std::string t = layers[0]->FusedTimingsFor(c.B); !t.empty()) {
    line << " fused_kernels_ms=" << t;
  }
  // The engine's output, for the driver to compare with PyTorch's.
  std::vector<float> yh(y_n);
  cudaMemcpy(yh.data(), y[n_layers - 1].get(), y_n * 4, cudaMemcpyDeviceToHost);
  std::ofstream(c.out, std::ios::binary) << client::SerializeNpyFloat32({c.B, c.T, dirs * c.H}, yh);
  // A stack: the same layers one after the other on their own algorithms, against the run above
  // (the stacked launches where chosen): the largest difference, relative to the largest value.
  if (n_layers > 1) {
    for (size_t l = 0; l < n_layers; ++l) RNNSERVE_RETURN_IF_ERROR(layers[l]->Forward(layer_io(l)));
    // The stream does not block: the copy below waits for nothing on it by itself.
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    std::vector<float> apart(y_n);
    cudaMemcpy(apart.data(), y[n_layers - 1].get(), y_n * 4, cudaMemcpyDeviceToHost);
    float diff = 0.0f, scale = 0.0f;
    for (int64_t i = 0; i < y_n; ++i) {
      diff = std::max(diff, std::abs(apart[i] - yh[i]));
      scale = std::max(scale, std::abs(apart[i]));
    }
    line << " stacked_vs_apart=" << (scale > 0.0f ? diff / scale : diff);
  }

  // CUDA graph of the whole stack with the chosen algorithm.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  float graph_ms = -1.0f;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    const absl::Status s = forward();
    const cudaError_t e = cudaStreamEndCapture(stream, &graph);
    if (s.ok() && e == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      graph_ms = TimeIt(stream,
                        [&]() { return CudaOk(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); });
    } else {
      line << " graph_error=" << (s.ok() ? cudaGetErrorName(e) : "capture");
    }
  }
  cudaGetLastError();
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  line << " graph_ms=" << graph_ms;
  // As CompiledModel runs it: fresh layers, graphs per layer for launch-bound batches, the
  // algorithm chosen the way it will run.
  {
    Stack engine_layers;
    RNNSERVE_RETURN_IF_ERROR(make_stack(&engine_layers));
    line << " engine_ms=" << TimeIt(stream, [&]() { return run(engine_layers); })
         << " engine_algo=" << algo_of(engine_layers);
  }

  // Each algorithm cuDNN accepted, pinned.
  for (cudnnRNNAlgo_t algo : layers[0]->algorithms()) {
    bool ok = true;
    for (auto& l : layers) ok = ok && l->ForceAlgorithm(algo).ok();
    const float ms = ok ? TimeIt(stream, forward) : -1.0f;
    line << " algo_" << static_cast<int>(algo) << "_ms=" << ms;
  }
  cudaGetLastError();
  // Large batches run cuDNN on sequence-major copies (kStandardSeqMajorAlgo): what the copy of y
  // back to batch-major costs alone (PyTorch's batch_first output is a transposed view of its
  // sequence-major y, not a copy).
  if (c.B >= 256) {
    line << " y_transpose_ms=" << TimeIt(stream, [&]() {
      return CudaOk(
          LaunchSwap01(y[0].as<float>(), y[1].as<float>(), c.T, c.B, int64_t{dirs} * c.H, stream),
          "transpose");
    });
  }
  layers.clear();
  cudnnDestroy(handle);
  cudaStreamDestroy(stream);

  // 2. CompiledModel::Run end to end: host input in, host output out.
  auto compiled = engine::cuda::CompileForGpu(model, {.math_mode = math}, 0);
  if (!compiled.ok()) return compiled.status();
  // Twice: the input in pageable memory (a lone request's decoded tensor), then in the
  // engine's host tensor (page-locked; how batch assembly builds a batch). Each call's outputs
  // are released before the next, as a response's are once it is encoded.
  auto time_run = [&](const engine::Batch& batch) -> absl::StatusOr<float> {
    std::vector<float> run_ms;
    for (int i = 0; i < kWarmup + kReps / 2; ++i) {
      std::vector<engine::Tensor> out;
      const auto t0 = std::chrono::steady_clock::now();
      RNNSERVE_RETURN_IF_ERROR((*compiled)->Run(batch, &out));
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= kWarmup) run_ms.push_back(std::chrono::duration<float, std::milli>(t1 - t0).count());
    }
    return Median(run_ms);
  };
  engine::Batch pageable, pinned;
  pageable.inputs.push_back(engine::Tensor::Float({c.B, c.T, c.I}, xf));
  pinned.inputs.push_back((*compiled)->NewHostTensor(engine::DType::kFloat32, {c.B, c.T, c.I}));
  std::copy(xf.begin(), xf.end(), pinned.inputs[0].f32());
  auto run_ms = time_run(pageable);
  if (!run_ms.ok()) return run_ms.status();
  auto run_pinned_ms = time_run(pinned);
  if (!run_pinned_ms.ok()) return run_pinned_ms.status();
  // What PCIe alone needs for this batch's input and output at the measured pinned bandwidth.
  const double io_floor_ms =
      (x_n * 4.0 / link.h2d_bytes_per_s + y_n * 4.0 / link.d2h_bytes_per_s) * 1e3;
  line << " run_ms=" << *run_ms << " run_pinned_ms=" << *run_pinned_ms
       << " io_floor_ms=" << io_floor_ms << " memory_bytes=" << (*compiled)->memory_bytes();
  results << line.str() << "\n";
  std::cout << line.str() << std::endl;
  return absl::OkStatus();
}

}  // namespace
}  // namespace rnnserve::bench

int main(int argc, char** argv) {
  std::string manifest_path, results_path;
  CLI::App app(
      "Times the GPU engine on recurrent stacks whose weights PyTorch wrote "
      "(bench/gpu_peers.py drives it)",
      "gpu_peers");
  app.add_option("MANIFEST", manifest_path, "one case a line (see bench/gpu_peers.cc)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("RESULTS", results_path, "gets one line a case: name key=value ...")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::ifstream manifest(manifest_path);
  std::ofstream results(results_path);
  const auto link = rnnserve::bench::MeasureLink();
  if (!link.ok()) {
    std::cerr << link.status() << "\n";
    return 1;
  }
  results << "pcie h2d_gbps=" << link->h2d_bytes_per_s / 1e9
          << " d2h_gbps=" << link->d2h_bytes_per_s / 1e9 << "\n";
  std::string text;
  int failures = 0;
  while (std::getline(manifest, text)) {
    if (text.empty()) continue;
    std::istringstream in(text);
    rnnserve::bench::Case c;
    in >> c.name >> c.cell >> c.I >> c.H >> c.layers >> c.bidir >> c.B >> c.T >> c.math >>
        c.weights >> c.x >> c.out;
    if (!in) {
      std::cerr << "bad manifest line: " << text << "\n";
      return 2;
    }
    if (auto s = rnnserve::bench::RunCase(c, *link, results); !s.ok()) {
      ++failures;
      results << c.name << " error=\"" << s.message() << "\"\n";
      std::cout << c.name << " error: " << s << std::endl;
    }
  }
  return failures == 0 ? 0 : 1;
}
