// The GPU engine's host IO: batch inputs built in its page-locked host tensors, outputs handed
// back in page-locked blocks from its pool (no page faults, one DMA each), blocks recycled
// across batches, and outputs that stay valid after the model that made them is gone. Answers
// are compared with the CPU engine. Skips with its reason where there is no GPU.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "engine/cuda/cuda_compiled_model.h"
#include "engine/cuda/cuda_model.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"

namespace rnnserve::testing {
namespace {

using engine::DType;
using engine::EngineKind;
using engine::Tensor;

bool PageLocked(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

Tensor RandomIn(const engine::CompiledModel& model, int B, int T, int I, uint32_t seed) {
  Tensor t = model.NewHostTensor(DType::kFloat32, {B, T, I});
  std::mt19937 rng(seed);
  const std::vector<float> v = RandomVector(&rng, static_cast<size_t>(B) * T * I, 1.0f);
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

TEST(GpuHostIoTest, NewHostTensorIsPageLockedAndZeroed) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  auto gpu = CompileOn(EngineKind::kCuda, RandomRnnModel({}));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int pass = 0; pass < 2; ++pass) {  // the second gets the first's recycled block
    Tensor t = (*gpu)->NewHostTensor(DType::kFloat32, {3, 5, 8});
    EXPECT_TRUE(t.wrapped());
    EXPECT_TRUE(PageLocked(t.f32()));
    EXPECT_TRUE(std::all_of(t.floats().begin(), t.floats().end(), [](float x) { return x == 0; }));
    std::fill(t.f32(), t.f32() + t.num_elements(), 7.0f);
  }
  Tensor ids = (*gpu)->NewHostTensor(DType::kInt64, {2, 4});
  EXPECT_TRUE(PageLocked(ids.i64()));
  EXPECT_EQ(ids.ints().size(), 8u);
}

TEST(GpuHostIoTest, OutputsArePageLockedMatchCpuAndOutliveTheModel) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({.input = 8, .hidden = 32, .return_state = true});
  auto cpu = CompileOn(EngineKind::kCpu, model);
  auto gpu = CompileOn(EngineKind::kCuda, model);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  engine::Batch pinned_batch{{RandomIn(**gpu, 4, 12, 8, 3)}, {12, 5, 9, 1}};
  engine::Batch pageable_batch{{Tensor(pinned_batch.inputs[0])}, pinned_batch.lengths};
  EXPECT_FALSE(pageable_batch.inputs[0].wrapped());
  std::vector<Tensor> want, got, got_pageable;
  ASSERT_TRUE((*cpu)->Run(pageable_batch, &want).ok());
  ASSERT_TRUE((*gpu)->Run(pinned_batch, &got).ok());
  ASSERT_TRUE((*gpu)->Run(pageable_batch, &got_pageable).ok());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(PageLocked(got[i].f32())) << "output " << i;
    EXPECT_LE(RelativeError(got[i], Doubles(want[i])), 1e-5) << "output " << i;
    EXPECT_EQ(Doubles(got[i]), Doubles(got_pageable[i])) << "output " << i;
  }
  const std::vector<double> first = Doubles(got[0]);
  gpu->reset();  // the outputs' blocks hold the pool, not the model
  pinned_batch = {};
  EXPECT_EQ(Doubles(got[0]), first);
  EXPECT_LE(RelativeError(got[0], Doubles(want[0])), 1e-5);
}

TEST(GpuHostIoTest, SteadyBatchesReuseThePinnedBlocks) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  auto gpu = CompileOn(EngineKind::kCuda, RandomRnnModel({.input = 16, .hidden = 64}));
  ASSERT_TRUE(gpu.ok());
  const auto& pool = dynamic_cast<const engine::cuda::CudaCompiledModel&>(**gpu).pinned_pool();
  // The first batch runs eagerly; the second is captured into a graph, which keeps the blocks
  // its downloads write; the others replay it. From the second on, nothing more is pinned.
  int64_t pinned_after_capture = 0, cached_after_capture = 0;
  for (int i = 0; i < 20; ++i) {
    engine::Batch batch{{RandomIn(**gpu, 16, 30, 16, i)}, {}};
    std::vector<Tensor> out;  // released before the next batch, as an encoded response is
    ASSERT_TRUE((*gpu)->Run(batch, &out).ok());
    out.clear();
    if (i == 1) {
      pinned_after_capture = pool.pinned_bytes();
      cached_after_capture = pool.cached_bytes();
    }
  }
  EXPECT_GT(pinned_after_capture, 0);
  EXPECT_EQ(pool.pinned_bytes(), pinned_after_capture);
  EXPECT_EQ(pool.cached_bytes(), cached_after_capture);  // every caller's block back in the pool
  EXPECT_EQ((*gpu)->counters().graph_replays, 18);
}

TEST(GpuHostIoTest, GraphsOffRunsEveryBatchEagerlyWithTheSameAnswers) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const engine::Model model = RandomRnnModel({.input = 8, .hidden = 32});
  auto cpu = CompileOn(EngineKind::kCpu, model);
  auto cuda = engine::Engine::Create({.kind = EngineKind::kCuda});
  ASSERT_TRUE(cpu.ok() && cuda.ok());
  auto gpu = (*cuda)->Compile(model, {.whole_batch_graphs = false});  // config: GPU_GRAPHS_OFF
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (uint32_t i = 0; i < 4; ++i) {
    engine::Batch batch{{RandomIn(**gpu, 4, 12, 8, i)}, {12, 5, 9, 12}};
    std::vector<Tensor> want, got;
    ASSERT_TRUE((*cpu)->Run(batch, &want).ok());
    ASSERT_TRUE((*gpu)->Run(batch, &got).ok());
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_LE(RelativeError(got[k], Doubles(want[k])), 1e-5) << "batch " << i << " output " << k;
    }
  }
  const engine::RunCounters counters = (*gpu)->counters();
  EXPECT_EQ(counters.graph_replays, 0);
  EXPECT_EQ(counters.graph_note, "whole-batch graphs off");
}

}  // namespace
}  // namespace rnnserve::testing
