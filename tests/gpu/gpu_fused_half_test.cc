// The fused cluster kernels with R stored in BF16 or FP16 (engine/cuda/fused_rnn.h, for layers
// compiled in those math modes: the FMA kernel and the tensor-core kernel), and the register
// kernel with R so stored (H = 128, 256, 512), against PyTorch's
// exact-FP32 answers: the relative L2 error of y, h_n and the LSTM's c_n within the mode's
// bound (kReducedPrecisionBounds), at batches 1..8 of sequences of mixed lengths, for every
// kernel and cluster size offered, LSTM and GRU at H = 128, 256 and 512; steps past a
// sequence's length output exact zeros. Through
// CudnnRecurrent the kernel is offered beside cuDNN's half-precision algorithms, runs eagerly
// and from a captured graph with FP32 states, and is closer to FP32 than cuDNN's standard
// algorithm in the same mode (which also rounds x, W, h and y).

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/fused_rnn.h"
#include "gtest/gtest.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/gpu/stream_and_handle.h"
#include "tests/gpu/torch_state_dict.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::MathMode;
using engine::cuda::CudnnRecurrent;
using engine::cuda::DeviceBuffer;
using engine::cuda::FusedRnn;
using engine::cuda::FusedRnnWeights;
using engine::cuda::RecurrentIO;

const ReducedPrecisionBound& BoundOf(MathMode mode) {
  for (const ReducedPrecisionBound& b : kReducedPrecisionBounds) {
    if (b.mode == mode) return b;
  }
  return kReducedPrecisionBounds[0];
}

FusedRnnWeights WeightsOf(MathMode mode) {
  return mode == MathMode::kBf16 ? FusedRnnWeights::kBf16 : FusedRnnWeights::kFp16;
}

bool ClustersLaunch() {
  int device = 0, clusters = 0;
  return cudaGetDevice(&device) == cudaSuccess &&
         cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device) == cudaSuccess &&
         clusters != 0;
}

struct Errors {
  double y = 0, h = 0, c = 0;
  double Max() const { return std::max({y, h, c}); }
};

using Forward = std::function<absl::Status(const RecurrentIO&)>;

// Runs `forward` (the fixture's single layer, one direction or two) on its first `batch`
// sequences `runs` times and returns the largest relative L2 errors of y, h_n and c_n against
// PyTorch; every step past a sequence's length must be exactly zero.
Errors RunFixture(const std::string& dir, const engine::RecurrentSpec& spec, int batch, int runs,
                  cudaStream_t stream, const Forward& forward) {
  Errors worst;
  const auto x = LoadNpy(dir + "input_0.npy");
  const auto len = LoadNpy(dir + "lengths.npy");
  const int B = batch, T = x.shape[1], I = x.shape[2], H = spec.hidden_size;
  const int D = static_cast<int>(spec.directions.size()), DH = D * H;
  const bool lstm = spec.cell == engine::CellType::kLstm;
  std::vector<float> xf(x.values.begin(), x.values.begin() + int64_t{B} * T * I);
  std::vector<int32_t> lengths(len.values.begin(), len.values.begin() + B);
  DeviceBuffer dx, dy, dh, dc, dl;
  EXPECT_TRUE(dx.Reserve(xf.size() * 4).ok());
  EXPECT_TRUE(dy.Reserve(size_t(B) * T * DH * 4).ok());
  EXPECT_TRUE(dh.Reserve(size_t(B) * DH * 4).ok());
  EXPECT_TRUE(dc.Reserve(size_t(B) * DH * 4).ok());
  EXPECT_TRUE(dl.Reserve(B * 4).ok());
  cudaMemcpy(dx.get(), xf.data(), xf.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dl.get(), lengths.data(), B * 4, cudaMemcpyHostToDevice);
  const RecurrentIO io{.B = B,
                       .T = T,
                       .lengths = lengths,
                       .lengths_dev = dl.as<int32_t>(),
                       .x = dx.as<float>(),
                       .y = dy.as<float>(),
                       .hy = dh.as<float>(),
                       .cy = lstm ? dc.as<float>() : nullptr};
  const auto want_y = FirstSequences(LoadNpy(dir + "expected_0.npy"), 0, B).values;
  const auto want_h = FirstSequences(LoadNpy(dir + "expected_1.npy"), 1, B).values;
  const auto want_c = lstm ? FirstSequences(LoadNpy(dir + "expected_2.npy"), 1, B).values : want_h;
  for (int run = 0; run < runs; ++run) {
    // Poison the outputs: every element must be written.
    cudaMemset(dy.get(), 0xff, size_t(B) * T * DH * 4);
    cudaMemset(dh.get(), 0xff, size_t(B) * DH * 4);
    cudaMemset(dc.get(), 0xff, size_t(B) * DH * 4);
    const absl::Status s = forward(io);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (!s.ok()) return {1e9, 1e9, 1e9};
    engine::Tensor y = engine::Tensor::Float({B, T, DH}), h = engine::Tensor::Float({D, B, H}),
                   c = engine::Tensor::Float({D, B, H});
    cudaMemcpy(y.f32(), dy.get(), y.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.f32(), dh.get(), h.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(c.f32(), dc.get(), c.num_elements() * 4, cudaMemcpyDeviceToHost);
    worst.y = std::max(worst.y, RelativeError(y, want_y));
    worst.h = std::max(worst.h, RelativeError(h, want_h));
    if (lstm) worst.c = std::max(worst.c, RelativeError(c, want_c));
    int64_t nonzero = 0;
    for (int b = 0; b < B; ++b) {
      for (int t = lengths[b]; t < T; ++t) {
        for (int j = 0; j < DH; ++j) nonzero += y.f32()[(int64_t{b} * T + t) * DH + j] != 0.0f;
      }
    }
    EXPECT_EQ(nonzero, 0) << "outputs past the lengths, run " << run;
  }
  return worst;
}

// The LSTM and GRU fixtures at H = 128, 256 and 512 in BF16 and FP16, and their test names.
auto HalfFixtures() {
  return ::testing::Combine(::testing::ValuesIn(KernelWidthFixtures()),
                            ::testing::Values(MathMode::kBf16, MathMode::kFp16));
}

std::string HalfFixtureName(
    const ::testing::TestParamInfo<std::tuple<std::string, MathMode>>& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) == MathMode::kBf16 ? "Bf16" : "Fp16");
}

class HalfClusterKernelTest : public ::testing::TestWithParam<std::tuple<std::string, MathMode>> {};

// Every cluster kernel offered (both kinds must be), pinned, at batches 1..8.
TEST_P(HalfClusterKernelTest, EveryClusterAndBatchSizeWithinBound) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const auto& [fixture, mode] = GetParam();
  const ReducedPrecisionBound& bound = BoundOf(mode);
  const std::string dir = "tests/fixtures/torch/" + fixture + "/";
  auto model = TorchFixtureModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  const int n = static_cast<int>(LoadNpy(dir + "lengths.npy").shape[0]);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    auto fused = FusedRnn::Create(spec, stream, WeightsOf(mode));
    if (!ClustersLaunch()) {
      if (!engine::cuda::FusedRnnRegCompiled(spec.hidden_size)) {
        EXPECT_EQ(fused.status().code(), absl::StatusCode::kUnimplemented);
      }
      cudaStreamDestroy(stream);
      GTEST_SKIP() << "no thread-block clusters on this device";
    }
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_TRUE((*fused)->has_cluster());
    EXPECT_EQ((*fused)->has_grid(), !(*fused)->register_units().empty());
    // The batch-tiled kernel from 128 units (HalfBatchedKernelTest runs it).
    EXPECT_EQ((*fused)->has_batched(), spec.hidden_size >= 128);
    EXPECT_FALSE((*fused)->has_one_block());
    const auto shapes = (*fused)->cluster_shapes();
    EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(), [](const auto& k) { return k.mma; }))
        << "no tensor-core kernel at H=" << spec.hidden_size;
    EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(), [](const auto& k) { return !k.mma; }))
        << "no FMA kernel at H=" << spec.hidden_size;
    for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
      const std::string kernel = (shapes[i].mma ? "mma" : "fma") + std::string(" cluster=") +
                                 std::to_string(shapes[i].cluster);
      for (int batch = 1; batch <= std::min(n, FusedRnn::kMaxBatch); ++batch) {
        SCOPED_TRACE(::testing::Message() << kernel << " B=" << batch);
        const Errors e = RunFixture(dir, spec, batch, 2, stream, [&](const RecurrentIO& io) {
          return (*fused)->ForwardCluster(io, i);
        });
        std::cout << "[ " << bound.name << " ] " << fixture << " " << kernel << " B=" << batch
                  << " rel L2 y " << e.y << " h " << e.h << " c " << e.c << "\n";
        EXPECT_LE(e.Max(), bound.relative_l2);
        if (::testing::Test::HasFailure()) break;
      }
    }
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Torch, HalfClusterKernelTest, HalfFixtures(), HalfFixtureName);

// The register kernel with R in BF16 / FP16 (H = 128, 256, 512), pinned, with each number of units
// a block it is offered, at batches 1..8, and in each number of groups of sequences it is offered
// in, at batches of at least 2 a group.
class HalfRegisterKernelTest : public ::testing::TestWithParam<std::tuple<std::string, MathMode>> {
};

TEST_P(HalfRegisterKernelTest, EveryBatchSizeWithinBound) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const auto& [fixture, mode] = GetParam();
  const ReducedPrecisionBound& bound = BoundOf(mode);
  auto f = LoadTorchLayerFixture(fixture);
  ASSERT_TRUE(f.ok()) << f.status();
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto fused = FusedRnn::Create(f->spec, sh.stream, WeightsOf(mode));
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_FALSE((*fused)->register_units().empty()) << "H=" << f->spec.hidden_size;
  for (int units : (*fused)->register_units()) {
    for (int batch = 1; batch <= std::min(f->sequences, FusedRnn::kMaxBatch); ++batch) {
      SCOPED_TRACE(::testing::Message() << "units " << units << " B=" << batch);
      const Errors e = RunFixture(f->dir, f->spec, batch, 2, sh.stream, [&](const RecurrentIO& io) {
        return (*fused)->ForwardRegisters(io, units);
      });
      std::cout << "[ " << bound.name << " ] " << fixture << " registers, units " << units
                << " B=" << batch << " rel L2 y " << e.y << " h " << e.h << " c " << e.c << "\n";
      EXPECT_LE(e.Max(), bound.relative_l2);
      if (::testing::Test::HasFailure()) return;
    }
  }
  for (const auto& [units, groups] : (*fused)->register_groups()) {
    for (int batch = 2 * groups; batch <= std::min(f->sequences, FusedRnn::kMaxBatch); ++batch) {
      SCOPED_TRACE(::testing::Message()
                   << "units " << units << " groups " << groups << " B=" << batch);
      const Errors e = RunFixture(f->dir, f->spec, batch, 2, sh.stream, [&](const RecurrentIO& io) {
        return (*fused)->ForwardRegisters(io, units, groups);
      });
      EXPECT_LE(e.Max(), bound.relative_l2);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, HalfRegisterKernelTest, HalfFixtures(), HalfFixtureName);

class HalfChooserTest : public ::testing::TestWithParam<std::tuple<std::string, MathMode>> {};

// A layer compiled in BF16 / FP16 offers the half-weight cluster kernel and, where it is
// compiled for the width, the register kernel (and no other fused kernel) beside cuDNN's
// algorithms; each within the bound; pinned, it runs eagerly and from a graph with FP32 states
// (the layer's half-precision state copies are not used), closer to FP32 than cuDNN's standard
// algorithm in the same mode; the engine's own choice stays within the bound.
TEST_P(HalfChooserTest, OfferedAndCloserThanCudnn) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const auto& [fixture, mode] = GetParam();
  const ReducedPrecisionBound& bound = BoundOf(mode);
  const std::string dir = "tests/fixtures/torch/" + fixture + "/";
  auto model = TorchFixtureModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  const int B = std::min(static_cast<int>(LoadNpy(dir + "lengths.npy").shape[0]), 8);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto make = [&]() { return CudnnRecurrent::Create(spec, "rnn", mode, sh.handle, sh.stream); };
  auto pinned = make(), cudnn = make(), chosen = make();
  ASSERT_TRUE(pinned.ok() && cudnn.ok() && chosen.ok()) << pinned.status();
  const auto algos = (*pinned)->algorithms();
  auto offered = [&](cudnnRNNAlgo_t a) {
    return std::find(algos.begin(), algos.end(), a) != algos.end();
  };
  EXPECT_EQ(offered(engine::cuda::kFusedAlgo), engine::cuda::FusedRnnRegCompiled(spec.hidden_size));
  EXPECT_EQ(offered(engine::cuda::kFusedBatchedAlgo), spec.hidden_size >= 128);
  if (offered(engine::cuda::kFusedAlgo)) {
    auto registers = make();
    ASSERT_TRUE(registers.ok()) << registers.status();
    ASSERT_TRUE((*registers)->ForceAlgorithm(engine::cuda::kFusedAlgo).ok());
    const Errors e = RunFixture(dir, spec, B, 3, sh.stream,
                                [&](const RecurrentIO& io) { return (*registers)->Forward(io); });
    std::cout << "[ " << bound.name << " ] " << fixture << " B=" << B
              << " register kernel rel L2 (max of y, h, c): " << e.Max() << "\n";
    EXPECT_LE(e.Max(), bound.relative_l2);
  }
  if (!ClustersLaunch()) GTEST_SKIP() << "no thread-block clusters on this device";
  ASSERT_TRUE(offered(engine::cuda::kFusedClusterAlgo));
  ASSERT_TRUE((*pinned)->ForceAlgorithm(engine::cuda::kFusedClusterAlgo).ok());
  ASSERT_TRUE((*cudnn)->ForceAlgorithm(CUDNN_RNN_ALGO_STANDARD).ok());
  // Three runs: eager, eager again, then a captured graph.
  const Errors fused = RunFixture(dir, spec, B, 3, sh.stream,
                                  [&](const RecurrentIO& io) { return (*pinned)->Forward(io); });
  const Errors standard = RunFixture(dir, spec, B, 3, sh.stream,
                                     [&](const RecurrentIO& io) { return (*cudnn)->Forward(io); });
  const Errors auto_chosen = RunFixture(
      dir, spec, B, 3, sh.stream, [&](const RecurrentIO& io) { return (*chosen)->Forward(io); });
  std::cout << "[ " << bound.name << " ] " << fixture << " B=" << B << " rel L2 (max of y, h, c)"
            << ": fused cluster " << fused.Max() << ", cuDNN standard " << standard.Max()
            << ", engine's choice (" << (*chosen)->ChoicesSummary() << ") " << auto_chosen.Max()
            << "\n";
  EXPECT_LE(fused.Max(), bound.relative_l2);
  EXPECT_LE(auto_chosen.Max(), bound.relative_l2);
  EXPECT_LT(fused.Max(), standard.Max());
}

INSTANTIATE_TEST_SUITE_P(Torch, HalfChooserTest,
                         ::testing::Combine(::testing::Values("TorchLstmClusterH512",
                                                              "TorchGruClusterH256"),
                                            ::testing::Values(MathMode::kBf16, MathMode::kFp16)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == MathMode::kBf16 ? "Bf16" : "Fp16");
                         });

// The batch-tiled kernel's fixtures (H=256, mixed lengths: 64 LSTM, 48 GRU sequences).
constexpr const char* kBatchedFixtures[] = {"TorchLstmBatchedH256", "TorchGruBatchedH256"};

// What EveryBatchedShape ran: the shapes and the largest relative L2 error of any.
struct ShapesRun {
  int shapes = 0;
  double worst = 0;
};

// Pins every shape of `fused`'s batch-tiled kernel whose tile's mma (kBatchedTiles) is `only`
// (-1: every shape) at each of `batches` sequences of the fixture in `dir` (0: all of them),
// each within `bound`; no shape offered may have mma `never`.
void EveryBatchedShape(const std::string& dir, const engine::RecurrentSpec& spec, FusedRnn& fused,
                       int never, int only, const std::vector<int>& batches,
                       const ReducedPrecisionBound& bound, cudaStream_t stream, ShapesRun* run) {
  const int n = static_cast<int>(LoadNpy(dir + "lengths.npy").shape[0]);
  for (const auto& shape : fused.batched_shapes()) {
    const int mma = engine::cuda::kBatchedTiles[shape.tile].mma;
    EXPECT_NE(mma, never) << "tile " << shape.tile;
    if (only >= 0 && mma != only) continue;
    ++run->shapes;
    for (int batch : batches) {
      SCOPED_TRACE(::testing::Message()
                   << dir << " blocks=" << shape.blocks << " tile=" << shape.tile
                   << " groups=" << shape.groups << " B=" << (batch > 0 ? batch : n));
      const Errors e =
          RunFixture(dir, spec, batch > 0 ? batch : n, 1, stream,
                     [&](const RecurrentIO& io) { return fused.ForwardBatched(io, shape); });
      EXPECT_LE(e.Max(), bound.relative_l2);
      run->worst = std::max(run->worst, e.Max());
    }
  }
}

// BF16 and FP16 layers on the batch-tiled kernel (R widened back to FP32 in shared memory,
// every sum FP32): every shape offered (FMA tiles and 3xTF32 tiles, never the TF32 ones) pinned
// at batches up to 64 of the batch-tiled fixtures, within the mode's bound; and through
// CudnnRecurrent, offered beside cuDNN's half algorithms, at B=40 as chosen.
class HalfBatchedKernelTest : public ::testing::TestWithParam<MathMode> {};

TEST_P(HalfBatchedKernelTest, EveryShapeWithinBound) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const MathMode mode = GetParam();
  const ReducedPrecisionBound& bound = BoundOf(mode);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  for (const std::string fixture : kBatchedFixtures) {
    auto f = LoadTorchLayerFixture(fixture);
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string& dir = f->dir;
    const engine::RecurrentSpec& spec = f->spec;
    auto fused = FusedRnn::Create(spec, sh.stream, WeightsOf(mode));
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE((*fused)->has_batched()) << fixture;
    ShapesRun run;
    EveryBatchedShape(dir, spec, **fused, /*never=*/1, /*only=*/-1, {1, 9, 33, 0}, bound, sh.stream,
                      &run);
    auto rnn = CudnnRecurrent::Create(spec, "rnn", mode, sh.handle, sh.stream);
    ASSERT_TRUE(rnn.ok()) << rnn.status();
    const auto algos = (*rnn)->algorithms();
    EXPECT_NE(std::find(algos.begin(), algos.end(), engine::cuda::kFusedBatchedAlgo), algos.end());
    const Errors chosen = RunFixture(dir, spec, 40, 3, sh.stream,
                                     [&](const RecurrentIO& io) { return (*rnn)->Forward(io); });
    EXPECT_LE(chosen.Max(), bound.relative_l2);
    std::cout << "[ " << bound.name << " ] " << fixture << ": batch-tiled shapes' largest rel L2 "
              << run.worst << "; B=40 as chosen (" << (*rnn)->ChoicesSummary() << ") "
              << chosen.Max() << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, HalfBatchedKernelTest,
                         ::testing::Values(MathMode::kBf16, MathMode::kFp16), [](const auto& info) {
                           return std::string(info.param == MathMode::kBf16 ? "Bf16" : "Fp16");
                         });

// Both directions of a bidirectional layer with R in BF16 / FP16: the register kernel, both in
// one launch at every batch 1..8 and one after the other at 8, in every number of units a block
// offered; every batch-tiled shape (FMA and 3xTF32 tiles, never the TF32 ones) at 1, 8 and all
// of the fixture's sequences; each pinned, within the mode's bound of PyTorch's FP32 answers;
// and through CudnnRecurrent, which offers both beside cuDNN's half algorithms, as chosen.
class HalfBidirectionalTest : public ::testing::TestWithParam<std::tuple<std::string, MathMode>> {};

TEST_P(HalfBidirectionalTest, RegisterAndBatchTiledKernelsWithinBound) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const auto& [fixture, mode] = GetParam();
  const ReducedPrecisionBound& bound = BoundOf(mode);
  auto f = LoadTorchLayerFixture(fixture);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->spec.directions.size(), 2u);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto fused = FusedRnn::Create(f->spec, sh.stream, WeightsOf(mode));
  ASSERT_TRUE(fused.ok()) << fused.status();
  ASSERT_FALSE((*fused)->register_units().empty());
  ASSERT_TRUE((*fused)->has_batched());
  const int most = std::min(f->sequences, FusedRnn::kMaxBatch);
  double worst = 0;
  for (int units : (*fused)->register_units()) {
    for (int batch = 1; batch <= most + 1; ++batch) {
      const bool apart = batch > most;  // then both directions one after the other, at `most`
      SCOPED_TRACE(::testing::Message() << "registers, units " << units << (apart ? " apart" : "")
                                        << " B=" << std::min(batch, most));
      const Errors e = RunFixture(
          f->dir, f->spec, std::min(batch, most), 2, sh.stream,
          [&](const RecurrentIO& io) { return (*fused)->ForwardRegisters(io, units, 1, apart); });
      EXPECT_LE(e.Max(), bound.relative_l2);
      worst = std::max(worst, e.Max());
      if (HasFailure()) return;
    }
  }
  ShapesRun run;
  EveryBatchedShape(f->dir, f->spec, **fused, /*never=*/1, /*only=*/-1, {1, most, 0}, bound,
                    sh.stream, &run);
  auto rnn = CudnnRecurrent::Create(f->spec, "rnn", mode, sh.handle, sh.stream);
  ASSERT_TRUE(rnn.ok()) << rnn.status();
  const auto algos = (*rnn)->algorithms();
  EXPECT_NE(std::find(algos.begin(), algos.end(), engine::cuda::kFusedAlgo), algos.end());
  EXPECT_NE(std::find(algos.begin(), algos.end(), engine::cuda::kFusedBatchedAlgo), algos.end());
  const Errors chosen = RunFixture(f->dir, f->spec, 1, 3, sh.stream,
                                   [&](const RecurrentIO& io) { return (*rnn)->Forward(io); });
  EXPECT_LE(chosen.Max(), bound.relative_l2);
  std::cout << "[ " << bound.name << " ] " << fixture << ": register kernel's largest rel L2 "
            << worst << ", batch-tiled shapes' " << run.worst << "; B=1 as chosen ("
            << (*rnn)->ChoicesSummary() << ") " << chosen.Max() << "\n";
}

INSTANTIATE_TEST_SUITE_P(Torch, HalfBidirectionalTest,
                         ::testing::Combine(::testing::Values("TorchLstmBidirectionalBatchedH128",
                                                              "TorchGruBidirectionalBatchedH128"),
                                            ::testing::Values(MathMode::kBf16, MathMode::kFp16)),
                         HalfFixtureName);

// TF32 layers: the batch-tiled kernel's TF32 tensor-core tiles (R and h(t-1) rounded to TF32,
// FP32 sums), every shape offered pinned at batches up to 64 of the batch-tiled fixtures,
// within TF32's bound of PyTorch's exact answers; the 3xTF32 tiles of FP32 layers are not
// offered to them. The 3xTF32 tiles meet kFp32Exact (BatchedKernelTest).
TEST(Tf32BatchedKernelTest, EveryTensorCoreShapeWithinBound) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  for (const std::string fixture : kBatchedFixtures) {
    auto f = LoadTorchLayerFixture(fixture);
    ASSERT_TRUE(f.ok()) << f.status();
    auto fused = FusedRnn::Create(f->spec, sh.stream, FusedRnnWeights::kFp32, /*tf32=*/true);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ShapesRun run;
    EveryBatchedShape(f->dir, f->spec, **fused, /*never=*/3, /*only=*/1, {1, 9, 16, 33, 0},
                      BoundOf(MathMode::kTf32), sh.stream, &run);
    EXPECT_GT(run.shapes, 0) << fixture;
    std::cout << "[ TF32 ] " << fixture << ": " << run.shapes
              << " tensor-core shapes, largest rel L2 " << run.worst << "\n";
  }
}

}  // namespace
}  // namespace rnnserve::testing
