// Times the GPU engine on recurrent stacks whose weights PyTorch wrote (bench/gpu_peers.py
// drives it and times PyTorch on the same weights in the same run).
//
//   gpu_peers MANIFEST RESULTS
//
// MANIFEST: one case a line, "name cell I H layers bidirectional B T math weights.npz x.npy
// out.npy" (cell lstm|gru|gru_before, the last GRU reset_after=False, which cuDNN cannot run;
// math fp32|tf32|fp16|bf16; weights: PyTorch's state_dict names, and their gate order r, z, n).
// For each case, on one stream, after warm-up, timed with CUDA events (median of REPS):
//   - the layer stack on device buffers: with the algorithm the engine chose, eagerly, replayed
//     from one CUDA graph of the stack, and as the engine runs it (a graph per layer for batches
//     up to 64); then eagerly once per algorithm cuDNN accepts (gru_before: on FusedRnn's
//     kernel of its choice, then on FusedRecurrent);
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
#include "engine/cuda/fused_recurrent.h"
#include "engine/cuda/fused_rnn.h"
#include "engine/cuda/kernels.h"

namespace rnnserve::bench {
namespace {

using engine::cuda::CudaOk;
using engine::cuda::CudnnRecurrent;
using engine::cuda::DeviceBuffer;
using engine::cuda::FusedRecurrent;
using engine::cuda::FusedRnn;
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
    spec.cell = c.cell == "lstm" ? engine::CellType::kLstm : engine::CellType::kGru;
    spec.reset_after = c.cell != "gru_before";
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

// Device buffers of a stack over one batch of full-length sequences: x, every layer's own y, hy
// and cy (the layers of a stacked launch write theirs at once; at least two y, for the transpose
// timed below). Layer l reads y[l - 1] (x for the first) and writes y[l] and its part of hy, cy.
class StackBuffers {
 public:
  absl::Status Init(const Case& c, size_t layers, const std::vector<float>& xf) {
    c_ = c;
    dirs_ = c.bidir ? 2 : 1;
    y_.resize(std::max<size_t>(layers, 2));
    lengths_.assign(c.B, c.T);
    const int64_t states = int64_t{1} * layers * dirs_ * c.B * c.H * 4;
    RNNSERVE_RETURN_IF_ERROR(x_.Reserve(xf.size() * 4));
    for (auto& b : y_) RNNSERVE_RETURN_IF_ERROR(b.Reserve(y_n() * 4));
    RNNSERVE_RETURN_IF_ERROR(hy_.Reserve(states));
    RNNSERVE_RETURN_IF_ERROR(cy_.Reserve(states));
    RNNSERVE_RETURN_IF_ERROR(lens_.Reserve(c.B * 4));
    RNNSERVE_RETURN_IF_ERROR(
        CudaOk(cudaMemcpy(x_.get(), xf.data(), xf.size() * 4, cudaMemcpyHostToDevice), "x"));
    return CudaOk(cudaMemcpy(lens_.get(), lengths_.data(), c.B * 4, cudaMemcpyHostToDevice),
                  "lengths");
  }
  int64_t y_n() const { return int64_t{c_.B} * c_.T * dirs_ * c_.H; }
  engine::cuda::RecurrentIO IO(size_t l) {
    const int64_t states = int64_t{dirs_} * c_.B * c_.H * static_cast<int64_t>(l);
    return engine::cuda::RecurrentIO{.B = c_.B,
                                     .T = c_.T,
                                     .lengths = lengths_,
                                     .lengths_dev = lens_.as<int32_t>(),
                                     .x = l == 0 ? x_.as<float>() : y_[l - 1].as<float>(),
                                     .y = y_[l].as<float>(),
                                     .hy = hy_.as<float>() + states,
                                     .cy = cy_.as<float>() + states};
  }
  // Layer l's y on the host.
  std::vector<float> Y(size_t l) const {
    std::vector<float> out(y_n());
    cudaMemcpy(out.data(), y_[l].get(), y_n() * 4, cudaMemcpyDeviceToHost);
    return out;
  }
  DeviceBuffer& y(size_t l) { return y_[l]; }

 private:
  Case c_;
  int dirs_ = 1;
  std::vector<int32_t> lengths_;
  DeviceBuffer x_, hy_, cy_, lens_;
  std::vector<DeviceBuffer> y_;
};

// The engine's output (the last layer's y), for the driver to compare with PyTorch's.
void WriteOutput(const Case& c, const std::vector<float>& y) {
  std::ofstream(c.out, std::ios::binary)
      << client::SerializeNpyFloat32({c.B, c.T, (c.bidir ? 2 : 1) * c.H}, y);
}

// forward captured once into a CUDA graph and replayed: " graph_ms=..." (-1 where it could not
// be captured, with graph_error=...).
template <typename Fn>
void TimeGraph(cudaStream_t stream, Fn forward, std::ostream& line) {
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
}

// The recurrent stack on device buffers through CudnnRecurrent, as the engine runs a layer
// cuDNN can run: with the algorithm the engine chose, eagerly, from one graph, as the engine
// runs it, and eagerly once per algorithm cuDNN accepts.
absl::Status TimeCudnnStack(const Case& c, const engine::Model& model, engine::MathMode math,
                            const std::vector<float>& xf, std::ostream& line) {
  const int dirs = c.bidir ? 2 : 1;
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
  const size_t n_layers = layers.size();
  StackBuffers bufs;
  RNNSERVE_RETURN_IF_ERROR(bufs.Init(c, n_layers, xf));
  const int64_t y_n = bufs.y_n();
  // The layers run through ForwardStack (runs of layers in one launch where that is faster).
  auto run = [&](Stack& stack) -> absl::Status {
    if (stack.size() == 1) return stack[0]->Forward(bufs.IO(0));
    std::vector<CudnnRecurrent::StackEntry> entries;
    for (size_t l = 0; l < stack.size(); ++l) entries.push_back({stack[l].get(), bufs.IO(l)});
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
  const std::vector<float> yh = bufs.Y(n_layers - 1);
  WriteOutput(c, yh);
  // A stack: the same layers one after the other on their own algorithms, against the run above
  // (the stacked launches where chosen): the largest difference, relative to the largest value.
  if (n_layers > 1) {
    for (size_t l = 0; l < n_layers; ++l) RNNSERVE_RETURN_IF_ERROR(layers[l]->Forward(bufs.IO(l)));
    // The stream does not block: the copy below waits for nothing on it by itself.
    RNNSERVE_RETURN_IF_ERROR(CudaOk(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    const std::vector<float> apart = bufs.Y(n_layers - 1);
    float diff = 0.0f, scale = 0.0f;
    for (int64_t i = 0; i < y_n; ++i) {
      diff = std::max(diff, std::abs(apart[i] - yh[i]));
      scale = std::max(scale, std::abs(apart[i]));
    }
    line << " stacked_vs_apart=" << (scale > 0.0f ? diff / scale : diff);
  }
  // CUDA graph of the whole stack with the chosen algorithm.
  TimeGraph(stream, forward, line);
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
      return CudaOk(LaunchSwap01(bufs.y(0).as<float>(), bufs.y(1).as<float>(), c.T, c.B,
                                 int64_t{dirs} * c.H, stream),
                    "transpose");
    });
  }
  layers.clear();
  cudnnDestroy(handle);
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

// A stack that cuDNN cannot run (GRU reset_after=False) on FusedRnn, as the engine's model runs
// it (a layer: ForwardFastest, which times its kernels per batch size; layers: ForwardChain,
// stacked or apart, whichever it timed faster, and each layer on ForwardFastest as apart_ms):
// eagerly and from one graph; then on FusedRecurrent (a block a sequence, which the model runs
// where FusedRnn does not take the layer or the batch), eagerly, as algo_fused_recurrent_ms.
absl::Status TimeFusedStack(const Case& c, const engine::Model& model, const std::vector<float>& xf,
                            std::ostream& line) {
  cudaStream_t stream;
  RNNSERVE_RETURN_IF_ERROR(
      CudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"));
  std::vector<std::unique_ptr<FusedRnn>> layers;
  std::vector<std::unique_ptr<FusedRecurrent>> plain;
  for (const auto& layer : model.layers) {
    const auto& spec = std::get<engine::RecurrentSpec>(layer.spec);
    auto f = FusedRnn::Create(spec, stream);
    if (!f.ok()) return f.status();
    if (!(*f)->Takes(c.B)) {
      return absl::UnimplementedError(absl::StrCat("FusedRnn does not take batches of ", c.B));
    }
    layers.push_back(std::move(*f));
    auto p = FusedRecurrent::Create(spec, stream);
    if (!p.ok()) return p.status();
    plain.push_back(std::move(*p));
  }
  StackBuffers bufs;
  RNNSERVE_RETURN_IF_ERROR(bufs.Init(c, layers.size(), xf));
  auto apart = [&]() -> absl::Status {
    for (size_t l = 0; l < layers.size(); ++l) {
      RNNSERVE_RETURN_IF_ERROR(layers[l]->ForwardFastest(bufs.IO(l)));
    }
    return absl::OkStatus();
  };
  auto forward = [&]() -> absl::Status {
    if (layers.size() == 1) return apart();
    std::vector<FusedRnn::StackLayer> chain;
    for (size_t l = 0; l < layers.size(); ++l) chain.push_back({layers[l].get(), bufs.IO(l)});
    return FusedRnn::ForwardChain(chain);
  };
  const float auto_ms = TimeIt(stream, forward);
  const FusedRnn& first = *layers[0];
  const bool batched = first.FastestKernelFor(c.B) == FusedRnn::Kernel::kBatched;
  std::string algo = batched ? "fused_batched_fp32/" + first.BatchedKernelFor(c.B)
                             : "fused_fp32/" + first.GridKernelFor(c.B);
  if (layers.size() > 1) {  // how the layers ran: "stacked_2/u8" or "apart"
    std::string runs = first.ChainFor(c.B, c.T);
    std::replace(runs.begin(), runs.end(), ' ', '_');
    absl::StrAppend(&algo, ",", runs);
  }
  line << " auto_ms=" << auto_ms << " auto_algo=" << algo;
  const std::string t = batched ? first.BatchedTimingsFor(c.B) : first.GridTimingsFor(c.B);
  if (!t.empty()) line << " fused_kernels_ms=" << t;
  WriteOutput(c, bufs.Y(layers.size() - 1));
  TimeGraph(stream, forward, line);
  if (layers.size() > 1) line << " apart_ms=" << TimeIt(stream, apart);
  // The model runs this same call.
  line << " engine_ms=" << auto_ms << " engine_algo=" << algo;
  line << " algo_fused_recurrent_ms=" << TimeIt(stream, [&]() -> absl::Status {
    for (size_t l = 0; l < plain.size(); ++l) {
      RNNSERVE_RETURN_IF_ERROR(plain[l]->Forward(bufs.IO(l), nullptr));
    }
    return absl::OkStatus();
  });
  layers.clear();
  plain.clear();
  cudaStreamDestroy(stream);
  return absl::OkStatus();
}

absl::Status RunCase(const Case& c, const Link& link, std::ostream& results) {
  auto sd = client::ReadNpz(c.weights);
  if (!sd.ok()) return sd.status();
  auto xa = client::ReadNpy(c.x);
  if (!xa.ok()) return xa.status();
  const engine::Model model = ModelFrom(c, *sd);
  const engine::MathMode math = ParseMath(c.math);
  const int dirs = c.bidir ? 2 : 1;
  const int64_t x_n = int64_t{c.B} * c.T * c.I, y_n = int64_t{c.B} * c.T * dirs * c.H;
  const std::vector<float> xf = Floats(*xa);
  std::ostringstream line;
  line << c.name;

  // 1. The recurrent stack on device buffers.
  RNNSERVE_RETURN_IF_ERROR(c.cell == "gru_before" ? TimeFusedStack(c, model, xf, line)
                                                  : TimeCudnnStack(c, model, math, xf, line));

  // 2. CompiledModel::Run end to end: host input in, host output out.
  auto gpu = engine::Engine::Create({.kind = engine::EngineKind::kCuda});
  if (!gpu.ok()) return gpu.status();
  auto compiled = (*gpu)->Compile(model, {.math_mode = math});
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
