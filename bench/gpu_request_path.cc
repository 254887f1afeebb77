// Where a small request's GPU engine call goes: CompiledModel::Run of a real model file for one
// small batch, timed on the host clock (the server's "compute infer" is this plus its own
// bookkeeping), beside the same model cut after each layer (so each layer's share is the
// difference), the whole model called as the server calls it (after a pause, and on a new
// thread each time), and the CUDA primitives a Run is made of, each with the stream
// synchronisation a Run ends with.
//
//   gpu_request_path MODEL_FILE [--batch B] [--steps T] [--reps N]
//   gpu_request_path MODEL_FILE --chunks [--steps T] [--reps N]
//
// With --chunks it times instead a step-level batching chunk of T steps at batch sizes 1..64:
// through slot states in device memory (engine/slot_states.h), with every row's length T and
// with mixed lengths, beside a plain Run that takes its states from the host and returns them
// (the chunk before slot states), a plain Run without states, and writing fresh slots.
//
// Prints one line a measurement: name median_us p90_us.

#include <cuda_runtime_api.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/cuda_model.h"
#include "engine/cuda/cuda_util.h"
#include "engine/engine.h"
#include "engine/slot_states.h"
#include "models/model_loader.h"

namespace rnnserve::bench {
namespace {

using engine::cuda::CudaOk;

struct Timing {
  double median_us = 0, p90_us = 0;
};

// Runs fn `reps` times after reps/10 warm-up calls; fn returns false on error.
Timing Time(int reps, const std::function<bool()>& fn) {
  for (int i = 0; i < std::max(reps / 10, 10); ++i) {
    if (!fn()) return {-1, -1};
  }
  std::vector<double> us;
  us.reserve(reps);
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!fn()) return {-1, -1};
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10]};
}

Timing Median(std::vector<double>* us) {
  if (us->empty()) return {-1, -1};
  std::sort(us->begin(), us->end());
  return {(*us)[us->size() / 2], (*us)[us->size() * 9 / 10]};
}

void Print(const std::string& name, Timing t) {
  std::printf("%-44s %9.1f %9.1f\n", name.c_str(), t.median_us, t.p90_us);
}

// The model's first `k` layers, the last one's first output as the model's output.
engine::Model Prefix(const engine::Model& m, size_t k) {
  engine::Model p = m;
  p.layers.resize(k);
  p.output_values = {p.layers.back().outputs[0]};
  p.outputs.resize(1);
  p.outputs[0].name = p.layers.back().name;
  return p;
}

// Step-level batching's chunks (--chunks): see the file comment.
int Chunks(const engine::Model& model, engine::Engine& cuda, int T, int reps, bool graphs) {
  auto compiled = cuda.Compile(model, {.max_batch_size = 64, .whole_batch_graphs = graphs});
  if (!compiled.ok()) {
    std::cerr << compiled.status() << "\n";
    return 1;
  }
  engine::CompiledModel& m = **compiled;
  auto batch_of = [&](int B, bool mixed) {
    engine::Batch batch;
    for (const engine::ValueInfo& in : model.inputs) {
      engine::Shape shape = in.shape;
      shape[0] = B;
      if (shape.size() >= 2) shape[1] = T;
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      engine::Tensor t = m.NewHostTensor(in.dtype, shape);
      for (int64_t i = 0; i < t.num_elements(); ++i)
        t.f32()[i] = 0.01f * static_cast<float>(i % 97);
      batch.inputs.push_back(std::move(t));
    }
    for (int j = 0; j < B; ++j) batch.lengths.push_back(mixed ? 1 + (j * 7) % T : T);
    batch.continues = true;
    return batch;
  };
  // The state rows, from a probe's final states.
  engine::StateRows rows;
  {
    engine::Batch probe = batch_of(1, false);
    engine::StateMap finals;
    probe.final_states = &finals;
    std::vector<engine::Tensor> out;
    if (auto st = m.Run(probe, &out); !st.ok()) {
      std::cerr << st << "\n";
      return 1;
    }
    for (const auto& [layer, ts] : finals) {
      for (const engine::Tensor& t : ts)
        rows[layer].emplace_back(t.shape().begin() + 1, t.shape().end());
    }
  }
  auto slots = engine::NewSlotStates(&m, rows, 64);
  if (!slots.ok()) {
    std::cerr << slots.status() << "\n";
    return 1;
  }
  std::printf("# chunks of T=%d, slot states in %s memory; median and p90 in microseconds\n", T,
              (*slots)->where());
  std::printf("%-44s %9s %9s\n", "what", "median_us", "p90_us");
  std::vector<engine::Tensor> out;
  for (int B : {1, 2, 4, 8, 16, 32, 64}) {
    std::vector<int32_t> which;  // scattered slots: 37 is prime to 64
    for (int j = 0; j < B; ++j) which.push_back((j * 37) % 64);
    const std::string b = "B=" + std::to_string(B) + " ";
    for (bool mixed : {false, true}) {
      const engine::Batch batch = batch_of(B, mixed);
      Print(b + (mixed ? "slots, mixed lengths" : "slots, full lengths"),
            Time(reps, [&] { return (*slots)->Run(batch, which, &out).ok(); }));
    }
    // As step-level batching's chunks come: rows' lengths differ from one chunk to the next
    // (the longest is the chunk's steps while a row has that many left).
    engine::Batch moving = batch_of(B, true);
    int call = 0;
    Print(b + "slots, new lengths each call", Time(reps, [&] {
            ++call;
            for (int j = 0; j < B; ++j) moving.lengths[j] = 1 + (j * 7 + call * 5) % T;
            moving.lengths[call % B] = T;
            return (*slots)->Run(moving, which, &out).ok();
          }));
    engine::Batch plain = batch_of(B, true);
    Print(b + "Run, no states", Time(reps, [&] { return m.Run(plain, &out).ok(); }));
    engine::StateMap finals;
    for (const auto& [layer, shapes] : rows) {
      for (const engine::Shape& r : shapes) {
        engine::Shape shape = {B};
        shape.insert(shape.end(), r.begin(), r.end());
        plain.initial_states[layer].push_back(engine::Tensor::Float(shape));
      }
    }
    plain.final_states = &finals;
    Print(b + "Run, host states in and out", Time(reps, [&] { return m.Run(plain, &out).ok(); }));
    const std::vector<int32_t> fresh(which.begin(), which.begin() + std::min(B, 4));
    Print(b + "Write, " + std::to_string(fresh.size()) + " fresh slots (zeros)",
          Time(reps, [&] { return (*slots)->Write(fresh, {}).ok(); }));
  }
  return 0;
}

int Main(const std::string& path, int B, int T, int reps, bool chunks, bool graphs) {
  auto model = models::LoadModelFile(path);
  if (!model.ok()) {
    std::cerr << model.status() << "\n";
    return 1;
  }
  auto cuda = engine::Engine::Create({.kind = engine::EngineKind::kCuda});
  if (!cuda.ok()) {
    std::cerr << cuda.status() << "\n";
    return 1;
  }
  if (chunks) return Chunks(*model, **cuda, T, reps, graphs);
  std::printf("# %s, B=%d T=%d, %d timed calls; median and p90 in microseconds\n", path.c_str(), B,
              T, reps);
  std::printf("%-44s %9s %9s\n", "what", "median_us", "p90_us");
  auto input_of = [&](const engine::CompiledModel& c, bool pinned) {
    engine::Batch batch;
    for (const engine::ValueInfo& in : model->inputs) {
      engine::Shape shape = in.shape;
      shape[0] = B;
      if (shape.size() >= 2 && shape[1] < 0) shape[1] = T;
      for (int64_t& d : shape) d = d < 0 ? 1 : d;
      engine::Tensor t = pinned
                             ? c.NewHostTensor(in.dtype, shape)
                             : (in.dtype == engine::DType::kInt64 ? engine::Tensor::Int64(shape)
                                                                  : engine::Tensor::Float(shape));
      if (in.dtype == engine::DType::kFloat32) {
        for (int64_t i = 0; i < t.num_elements(); ++i)
          t.f32()[i] = 0.01f * static_cast<float>(i % 97);
      }
      batch.inputs.push_back(std::move(t));
    }
    return batch;
  };
  std::vector<double> idle_run_us;
  for (size_t k = 1; k <= model->layers.size(); ++k) {
    const bool whole = k == model->layers.size();
    auto compiled =
        (*cuda)->Compile(whole ? *model : Prefix(*model, k), {.whole_batch_graphs = graphs});
    if (!compiled.ok()) {
      std::cerr << "layers 1.." << k << ": " << compiled.status() << "\n";
      continue;
    }
    for (bool pinned : {false, true}) {
      if (!whole && pinned) continue;
      const engine::Batch batch = input_of(**compiled, pinned);
      std::vector<engine::Tensor> out;
      const std::string name =
          whole ? std::string("Run(), whole model, ") + (pinned ? "pinned input" : "pageable input")
                : "Run(), through layer " + std::to_string(k) + " (" + model->layers[k - 1].name +
                      ")";
      Print(name, Time(reps, [&] { return (*compiled)->Run(batch, &out).ok(); }));
      if (!whole || pinned) continue;
      // As the server calls it: after a pause (a client's round trip), and from a thread of a
      // pool that takes turns (gRPC's handler threads).
      Print("Run(), whole model, after 250 us idle", Time(reps / 4, [&] {
              std::this_thread::sleep_for(std::chrono::microseconds(250));
              const auto t0 = std::chrono::steady_clock::now();
              const bool ok = (*compiled)->Run(batch, &out).ok();
              idle_run_us.push_back(
                  std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                      .count());
              return ok;
            }));
      Print("  of which Run() itself", Median(&idle_run_us));
      std::vector<double> threaded_us;
      for (int round = 0; round < reps / 8; ++round) {
        std::thread t([&] {
          const auto t0 = std::chrono::steady_clock::now();
          (*compiled)->Run(batch, &out).IgnoreError();
          threaded_us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                  .count());
        });
        t.join();
      }
      Print("Run(), whole model, each call on a new thread", Median(&threaded_us));
    }
  }
  // The primitives, each followed by the stream synchronisation a Run ends with.
  cudaStream_t stream = nullptr;
  if (!CudaOk(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream").ok()) return 1;
  void *host = nullptr, *dev = nullptr;
  cudaHostAlloc(&host, 1 << 20, 0);
  cudaMalloc(&dev, 1 << 20);
  std::vector<char> pageable(1 << 20);
  const size_t in_bytes = static_cast<size_t>(B) * T * 8 * sizeof(float);
  auto sync = [&] { return cudaStreamSynchronize(stream) == cudaSuccess; };
  Print("cudaStreamSynchronize, idle stream", Time(reps, sync));
  Print("cudaSetDevice", Time(reps, [&] { return cudaSetDevice(0) == cudaSuccess; }));
  Print("memset launch + sync",
        Time(reps, [&] { return cudaMemsetAsync(dev, 0, 256, stream) == cudaSuccess && sync(); }));
  Print("H2D " + std::to_string(in_bytes) + " B pinned + sync", Time(reps, [&] {
          return cudaMemcpyAsync(dev, host, in_bytes, cudaMemcpyHostToDevice, stream) ==
                     cudaSuccess &&
                 sync();
        }));
  Print("H2D " + std::to_string(in_bytes) + " B pageable + sync", Time(reps, [&] {
          return cudaMemcpyAsync(dev, pageable.data(), in_bytes, cudaMemcpyHostToDevice, stream) ==
                     cudaSuccess &&
                 sync();
        }));
  Print("D2H 16 B pinned + sync", Time(reps, [&] {
          return cudaMemcpyAsync(host, dev, 16, cudaMemcpyDeviceToHost, stream) == cudaSuccess &&
                 sync();
        }));
  Print("4 memset launches + sync", Time(reps, [&] {
          for (int i = 0; i < 4; ++i) cudaMemsetAsync(dev, 0, 256, stream);
          return sync();
        }));
  cudaFree(dev);
  cudaFreeHost(host);
  cudaStreamDestroy(stream);
  return 0;
}

}  // namespace
}  // namespace rnnserve::bench

int main(int argc, char** argv) {
  std::string path;
  int batch = 1, steps = 10, reps = 2000;
  bool chunks = false;
  CLI::App app(
      "Times a small request's GPU engine call, layer by layer, beside the CUDA "
      "primitives it is made of",
      "gpu_request_path");
  app.add_option("MODEL_FILE", path, "a model file (.h5, .keras, .onnx)")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--batch", batch, "sequences in the batch")->capture_default_str();
  app.add_option("--steps", steps, "time steps of a dynamic time axis")->capture_default_str();
  app.add_option("--reps", reps, "timed calls per measurement")->capture_default_str();
  app.add_flag("--chunks", chunks, "time step-level batching chunks of --steps steps instead");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // RNNSERVE_GPU_MODEL_GRAPHS=0 turns whole-batch graphs off, as it does in the server.
  const char* graphs = std::getenv("RNNSERVE_GPU_MODEL_GRAPHS");
  return rnnserve::bench::Main(path, batch, steps, reps, chunks,
                               graphs == nullptr || std::string(graphs) != "0");
}
