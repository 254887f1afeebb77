// The exact-FP32 fused LSTM and GRU (engine/cuda/fused_rnn.h), their grid kernel, the LSTM's
// one-block kernel, their thread-block-cluster kernel and their batch-tiled kernel, pinned
// against PyTorch's answers, and each cuDNN algorithm the layer accepts likewise, whichever the
// engine would pick by timing.

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/npy.h"
#include "engine/cuda/cudnn_rnn.h"
#include "engine/cuda/fused_rnn.h"
#include "gtest/gtest.h"
#include "models/model_loader.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/gpu_tolerances.h"
#include "tests/gpu/graph_replay.h"
#include "tests/gpu/stream_and_handle.h"
#include "tests/gpu/torch_state_dict.h"
#include "tests/support/fixtures.h"

namespace rnnserve::testing {
namespace {

using engine::cuda::CudnnRecurrent;
using engine::cuda::DeviceBuffer;

class PinnedAlgorithmTest : public ::testing::TestWithParam<std::string> {};

using Forward = std::function<absl::Status(const engine::cuda::RecurrentIO&)>;

// Runs `forward` (the fixture's single LSTM or GRU layer) on the first `batch` sequences (all
// when 0), three times (eager, captured, replayed), then, when `then` is given, once more on
// those sequences in that order (the same buffers: other lengths in each row); compares y, h_n
// and the LSTM's c_n each time.
void CheckForward(const std::string& dir, const engine::RecurrentSpec& spec, int batch,
                  cudaStream_t stream, const Forward& forward, const std::vector<int>& then = {});

// Runs the fixture's single LSTM or GRU layer with `algo` pinned on its first `batch` sequences
// (all when 0); compares y, h_n and the LSTM's c_n.
void CheckAlgorithm(const std::string& fixture, cudnnRNNAlgo_t algo, bool required, int batch = 0) {
  const std::string dir = "tests/fixtures/torch/" + fixture + "/";
  auto model = TorchFixtureModel(dir);
  if (!model.ok()) GTEST_SKIP() << "no fixture " << dir << ": " << model.status();
  ASSERT_EQ(model->layers.size(), 1u);
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto rnn = CudnnRecurrent::Create(spec, "rnn", engine::MathMode::kFp32, sh.handle, sh.stream);
  ASSERT_TRUE(rnn.ok()) << rnn.status();
  if (auto s = (*rnn)->ForceAlgorithm(algo); !s.ok()) {
    if (required) FAIL() << s;
    GTEST_SKIP() << s;
  }
  CheckForward(dir, spec, batch, sh.stream, [&](const auto& io) { return (*rnn)->Forward(io); });
}

void CheckForward(const std::string& dir, const engine::RecurrentSpec& spec, int batch,
                  cudaStream_t stream, const Forward& forward, const std::vector<int>& then) {
  const int B = batch > 0 ? batch : static_cast<int>(LoadNpy(dir + "lengths.npy").shape[0]);
  const client::NpyArray x_all = LoadNpy(dir + "input_0.npy"),
                         len_all = LoadNpy(dir + "lengths.npy");
  const int T = x_all.shape[1], I = x_all.shape[2], H = spec.hidden_size;
  const int dirs = static_cast<int>(spec.directions.size());
  const bool lstm = spec.cell == engine::CellType::kLstm;
  std::vector<std::vector<int>> orders(3, std::vector<int>(B));
  for (auto& order : orders) {
    for (int r = 0; r < B; ++r) order[r] = r;
  }
  if (!then.empty()) orders.push_back(then);
  DeviceBuffer dx, dy, dh, dc, dl;
  ASSERT_TRUE(dx.Reserve(size_t(B) * T * I * 4).ok());
  ASSERT_TRUE(dy.Reserve(size_t(B) * T * dirs * H * 4).ok());
  ASSERT_TRUE(dh.Reserve(size_t(dirs) * B * H * 4).ok());
  ASSERT_TRUE(dc.Reserve(size_t(dirs) * B * H * 4).ok());
  ASSERT_TRUE(dl.Reserve(B * 4).ok());
  std::vector<int32_t> lengths(B);
  for (size_t run = 0; run < orders.size(); ++run) {
    const std::vector<int>& order = orders[run];
    const auto x = Rows(x_all, 0, order);
    const auto len = Rows(len_all, 0, order);
    std::vector<float> xf(x.values.begin(), x.values.end());
    for (int r = 0; r < B; ++r) lengths[r] = static_cast<int32_t>(len.values[r]);
    cudaMemcpy(dx.get(), xf.data(), xf.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dl.get(), lengths.data(), B * 4, cudaMemcpyHostToDevice);
    // Poison the outputs: every element must be written.
    cudaMemset(dy.get(), 0xff, size_t(B) * T * dirs * H * 4);
    engine::cuda::RecurrentIO io{.B = B,
                                 .T = T,
                                 .lengths = lengths,
                                 .lengths_dev = dl.as<int32_t>(),
                                 .x = dx.as<float>(),
                                 .y = dy.as<float>(),
                                 .hy = dh.as<float>(),
                                 .cy = lstm ? dc.as<float>() : nullptr};
    const absl::Status s = forward(io);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    engine::Tensor y = engine::Tensor::Float({B, T, dirs * H}),
                   h = engine::Tensor::Float({dirs, B, H}), c = engine::Tensor::Float({dirs, B, H});
    cudaMemcpy(y.f32(), dy.get(), y.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.f32(), dh.get(), h.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(c.f32(), dc.get(), c.num_elements() * 4, cudaMemcpyDeviceToHost);
    EXPECT_TRUE(AllClose(y, Rows(LoadNpy(dir + "expected_0.npy"), 0, order), kFp32Exact))
        << "y, B=" << B << ", run " << run;
    EXPECT_TRUE(AllClose(h, Rows(LoadNpy(dir + "expected_1.npy"), 1, order), kFp32Exact))
        << "h_n, B=" << B << ", run " << run;
    if (lstm) {
      EXPECT_TRUE(AllClose(c, Rows(LoadNpy(dir + "expected_2.npy"), 1, order), kFp32Exact))
          << "c_n, B=" << B << ", run " << run;
    }
  }
}

TEST_P(PinnedAlgorithmTest, FusedExactFp32MatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithm(GetParam(), engine::cuda::kFusedAlgo, /*required=*/true);
}

TEST_P(PinnedAlgorithmTest, FusedBatchedExactFp32MatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithm(GetParam(), engine::cuda::kFusedBatchedAlgo, /*required=*/true);
}

TEST_P(PinnedAlgorithmTest, CudnnStandardMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithm(GetParam(), CUDNN_RNN_ALGO_STANDARD, /*required=*/true);
}

TEST_P(PinnedAlgorithmTest, CudnnStandardOnSequenceMajorCopiesMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithm(GetParam(), engine::cuda::kStandardSeqMajorAlgo, /*required=*/true);
}

INSTANTIATE_TEST_SUITE_P(Torch, PinnedAlgorithmTest,
                         ::testing::Values("TorchLstmPackedMixedLengths", "TorchLstmWideHidden",
                                           "TorchLstmClusterH256", "TorchLstmClusterH512",
                                           "TorchGruClusterH128", "TorchGruClusterH256",
                                           "TorchGruClusterH512"),
                         [](const auto& info) { return info.param; });

// The cluster kernel at each batch size it takes (the first 1..8 of the fixture's sequences,
// whose lengths are mixed). Its widths (128, 256, 512) must get it on any device that launches
// clusters (Hopper and later), for the LSTM and the GRU.
class ClusterKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ClusterKernelTest, EveryBatchSizeMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  int device = 0, clusters = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device), cudaSuccess);
  const int n =
      static_cast<int>(LoadNpy("tests/fixtures/torch/" + GetParam() + "/lengths.npy").shape[0]);
  for (int batch = 1; batch <= std::min(n, engine::cuda::FusedRnn::kMaxBatch); ++batch) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch);
    CheckAlgorithm(GetParam(), engine::cuda::kFusedClusterAlgo, /*required=*/clusters != 0, batch);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, ClusterKernelTest, ::testing::ValuesIn(KernelWidthFixtures()),
                         [](const auto& info) { return info.param; });

// The grid kernel (h exchanged as tagged words, no grid barrier) of the LSTM and of the GRU
// (reset_after, n's recurrent bias inside r * (...)) at each batch size, pinned: the kernel for
// widths without a cluster kernel. Each batch size runs eagerly, captured and replayed, and the
// chooser's timing of the grid sizes launches it more times before that: every launch must
// take only its own words.
class GridKernelTest : public ::testing::TestWithParam<std::string> {};

// CheckAlgorithm with `algo` pinned at batch sizes 1 .. min(the fixture's sequences, most).
void CheckAlgorithmAtEveryBatchSize(const std::string& fixture, cudnnRNNAlgo_t algo, int most) {
  const int n =
      static_cast<int>(LoadNpy("tests/fixtures/torch/" + fixture + "/lengths.npy").shape[0]);
  for (int batch = 1; batch <= std::min(n, most); ++batch) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch);
    CheckAlgorithm(fixture, algo, /*required=*/true, batch);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::IsSkipped()) return;
  }
}

TEST_P(GridKernelTest, EveryBatchSizeMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithmAtEveryBatchSize(GetParam(), engine::cuda::kFusedAlgo,
                                 engine::cuda::FusedRnn::kMaxBatch);
}

INSTANTIATE_TEST_SUITE_P(Torch, GridKernelTest,
                         ::testing::Values("TorchGruClusterH128", "TorchGruClusterH512",
                                           "TorchLstmClusterH256", "TorchLstmClusterH512"),
                         [](const auto& info) { return info.param; });

// A fixture's one recurrent layer on FusedRnn in exact FP32, for tests that pin one kernel.
class PinnedKernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    RNNSERVE_SKIP_WITHOUT_GPU();
    auto f = LoadTorchLayerFixture(GetParam());
    ASSERT_TRUE(f.ok()) << f.status();
    f_ = *std::move(f);
    sh_ = std::make_unique<StreamAndHandle>();
    ASSERT_TRUE(sh_->ok());
    auto fused = engine::cuda::FusedRnn::Create(f_.spec, sh_->stream);
    ASSERT_TRUE(fused.ok()) << fused.status();
    fused_ = *std::move(fused);
  }

  TorchLayerFixture f_;
  std::unique_ptr<StreamAndHandle> sh_;
  std::unique_ptr<engine::cuda::FusedRnn> fused_;  // destroyed before the stream
};

// The register kernel (R in registers, each warp applying its unit's cell) with each number of
// units a block it is offered, pinned, at every batch size, LSTM and GRU, H = 128, 256 and 512.
class RegisterKernelTest : public PinnedKernelTest {};

TEST_P(RegisterKernelTest, EveryBatchSizeMatchesPyTorch) {
  ASSERT_FALSE(fused_->register_units().empty()) << "H=" << f_.spec.hidden_size;
  for (int units : fused_->register_units()) {
    for (int batch = 1; batch <= std::min(f_.sequences, engine::cuda::FusedRnn::kMaxBatch);
         ++batch) {
      SCOPED_TRACE(::testing::Message() << "units " << units << ", B=" << batch);
      CheckForward(f_.dir, f_.spec, batch, sh_->stream,
                   [&](const auto& io) { return fused_->ForwardRegisters(io, units); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The register kernel with the batch split into groups of sequences on blocks of their own
// (FusedRnnArgs::groups), in each (units, groups) offered, pinned, at every batch of at least
// two sequences a group: the groups' sequences, states and outputs land where one launch
// puts them.
TEST_P(RegisterKernelTest, GroupsMatchPyTorch) {
  if (fused_->register_groups().empty()) {
    GTEST_SKIP() << "no register kernel in groups at H=" << f_.spec.hidden_size
                 << " on this device (blocks of two groups do not fit on an SM at once)";
  }
  for (const auto& [units, groups] : fused_->register_groups()) {
    for (int batch = 2 * groups; batch <= std::min(f_.sequences, engine::cuda::FusedRnn::kMaxBatch);
         ++batch) {
      SCOPED_TRACE(::testing::Message()
                   << "units " << units << ", groups " << groups << ", B=" << batch);
      CheckForward(f_.dir, f_.spec, batch, sh_->stream,
                   [&](const auto& io) { return fused_->ForwardRegisters(io, units, groups); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, RegisterKernelTest, ::testing::ValuesIn(KernelWidthFixtures()),
                         [](const auto& info) { return info.param; });

// The stacked layers of a fixture run by `forward` (every layer's io, bottom first: each one's x
// the y of the one below) on its first B sequences, twice (the second launch finds the first's
// words in the exchange); compares the top layer's y and every layer's h_n (and c_n) with
// PyTorch's: within kFp32Exact, or (R in BF16 / FP16) within the relative L2 error `half_bound`.
using StackForward = std::function<absl::Status(const std::vector<engine::cuda::RecurrentIO>&)>;
void CheckStack(const std::string& dir, int layers, bool lstm, int B, cudaStream_t stream,
                const StackForward& forward, double half_bound = 0.0) {
  const client::NpyArray x_all = LoadNpy(dir + "input_0.npy"),
                         len_all = LoadNpy(dir + "lengths.npy");
  const int T = x_all.shape[1], I = x_all.shape[2];
  const int H = static_cast<int>(LoadNpy(dir + "expected_0.npy").shape[2]);
  std::vector<int> order(B);
  for (int r = 0; r < B; ++r) order[r] = r;
  const auto x = Rows(x_all, 0, order);
  const auto len = Rows(len_all, 0, order);
  std::vector<float> xf(x.values.begin(), x.values.end());
  std::vector<int32_t> lengths(B);
  for (int r = 0; r < B; ++r) lengths[r] = static_cast<int32_t>(len.values[r]);
  const size_t y_bytes = size_t(B) * T * H * 4, s_bytes = size_t(layers) * B * H * 4;
  DeviceBuffer dx, dh, dc, dl;
  std::vector<DeviceBuffer> dy(layers);
  ASSERT_TRUE(dx.Reserve(size_t(B) * T * I * 4).ok());
  for (auto& d : dy) ASSERT_TRUE(d.Reserve(y_bytes).ok());
  ASSERT_TRUE(dh.Reserve(s_bytes).ok());
  ASSERT_TRUE(dc.Reserve(s_bytes).ok());
  ASSERT_TRUE(dl.Reserve(B * 4).ok());
  cudaMemcpy(dx.get(), xf.data(), xf.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dl.get(), lengths.data(), B * 4, cudaMemcpyHostToDevice);
  std::vector<engine::cuda::RecurrentIO> ios;
  for (int l = 0; l < layers; ++l) {
    ios.push_back({.B = B,
                   .T = T,
                   .lengths = lengths,
                   .lengths_dev = dl.as<int32_t>(),
                   .x = l == 0 ? dx.as<float>() : dy[l - 1].as<float>(),
                   .y = dy[l].as<float>(),
                   .hy = dh.as<float>() + l * B * H,
                   .cy = lstm ? dc.as<float>() + l * B * H : nullptr});
  }
  for (int run = 0; run < 2; ++run) {
    // Poison the outputs: every element must be written.
    cudaMemset(dy.back().get(), 0xff, y_bytes);
    cudaMemset(dh.get(), 0xff, s_bytes);
    cudaMemset(dc.get(), 0xff, s_bytes);
    const absl::Status s = forward(ios);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    engine::Tensor y = engine::Tensor::Float({B, T, H}), h = engine::Tensor::Float({layers, B, H}),
                   c = engine::Tensor::Float({layers, B, H});
    cudaMemcpy(y.f32(), dy.back().get(), y.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(h.f32(), dh.get(), h.num_elements() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(c.f32(), dc.get(), c.num_elements() * 4, cudaMemcpyDeviceToHost);
    const client::NpyArray want[3] = {
        Rows(LoadNpy(dir + "expected_0.npy"), 0, order),
        Rows(LoadNpy(dir + "expected_1.npy"), 1, order),
        lstm ? Rows(LoadNpy(dir + "expected_2.npy"), 1, order) : client::NpyArray{}};
    const engine::Tensor* got[3] = {&y, &h, &c};
    const char* names[3] = {"y", "h_n", "c_n"};
    for (int k = 0; k < (lstm ? 3 : 2); ++k) {
      if (half_bound > 0.0) {
        EXPECT_LE(RelativeError(*got[k], want[k].values), half_bound)
            << names[k] << ", B=" << B << ", run " << run;
      } else {
        EXPECT_TRUE(AllClose(*got[k], want[k], kFp32Exact))
            << names[k] << ", B=" << B << ", run " << run;
      }
    }
  }
}

// The stacked layers of a PyTorch fixture (2 layers of LSTM and of GRU, 3 of LSTM; H = 128, 8
// sequences of mixed lengths up to 24 steps: past the ring of kFusedStackRing steps that a
// layer may run ahead of the one above).
class StackedKernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    RNNSERVE_SKIP_WITHOUT_GPU();
    dir_ = "tests/fixtures/torch/" + GetParam() + "/";
    auto model = TorchFixtureModel(dir_);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_GE(model->layers.size(), 2u);
    for (const auto& layer : model->layers) {
      spec_.push_back(std::get<engine::RecurrentSpec>(layer.spec));
    }
    sequences_ = static_cast<int>(LoadNpy(dir_ + "lengths.npy").shape[0]);
    sh_ = std::make_unique<StreamAndHandle>();
    ASSERT_TRUE(sh_->ok());
  }

  int layers() const { return static_cast<int>(spec_.size()); }
  bool lstm() const { return spec_[0].cell == engine::CellType::kLstm; }

  // Every layer on FusedRnn with `weights`.
  void MakeFused(engine::cuda::FusedRnnWeights weights) {
    fused_.clear();
    for (const auto& spec : spec_) {
      auto f = engine::cuda::FusedRnn::Create(spec, sh_->stream, weights);
      ASSERT_TRUE(f.ok()) << f.status();
      fused_.push_back(*std::move(f));
    }
  }

  // fused_[0]->ForwardStack over every layer, `units` a block.
  absl::Status ForwardFused(const std::vector<engine::cuda::RecurrentIO>& ios, int units) {
    std::vector<engine::cuda::FusedRnn::StackLayer> uppers;
    for (size_t l = 1; l < ios.size(); ++l) uppers.push_back({fused_[l].get(), ios[l]});
    return fused_[0]->ForwardStack(ios[0], uppers, units);
  }

  std::string dir_;
  std::vector<engine::RecurrentSpec> spec_;
  int sequences_ = 0;
  std::unique_ptr<StreamAndHandle> sh_;
  std::vector<std::unique_ptr<engine::cuda::FusedRnn>> fused_;  // destroyed before the stream
};

// The stacked register kernel (every layer in one launch), pinned in each units a block it is
// offered, at every batch size.
TEST_P(StackedKernelTest, EveryUnitsAndBatchMatchesPyTorch) {
  MakeFused(engine::cuda::FusedRnnWeights::kFp32);
  ASSERT_GE(fused_[0]->max_stack_layers(), layers());
  for (int l = 0; l + 1 < layers(); ++l) ASSERT_TRUE(fused_[l]->Stacks(*fused_[l + 1]));
  ASSERT_FALSE(fused_[0]->stack_units(layers()).empty());
  // A layer whose input is not the lower layer's width does not stack on it.
  EXPECT_FALSE(fused_[1]->Stacks(*fused_[0]));
  for (int units : fused_[0]->stack_units(layers())) {
    for (int B = 1; B <= std::min(sequences_, engine::cuda::FusedRnn::kMaxBatch); ++B) {
      SCOPED_TRACE(::testing::Message() << "units " << units << ", B=" << B);
      CheckStack(dir_, layers(), lstm(), B, sh_->stream,
                 [&](const auto& ios) { return ForwardFused(ios, units); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// CudnnRecurrent::ForwardStack: runs of stacked layers or the layers apart, whichever it timed
// faster, eagerly and replayed from a graph captured after the first batch.
TEST_P(StackedKernelTest, ChooserMatchesPyTorchEagerAndReplayed) {
  std::vector<std::unique_ptr<CudnnRecurrent>> rnn;
  for (int l = 0; l < layers(); ++l) {
    auto r = CudnnRecurrent::Create(spec_[l], absl::StrCat("layer", l), engine::MathMode::kFp32,
                                    sh_->handle, sh_->stream);
    ASSERT_TRUE(r.ok()) << r.status();
    rnn.push_back(*std::move(r));
  }
  auto forward = [&](const std::vector<engine::cuda::RecurrentIO>& ios) {
    std::vector<CudnnRecurrent::StackEntry> entries;
    for (int l = 0; l < layers(); ++l) entries.push_back({rnn[l].get(), ios[l]});
    return CudnnRecurrent::ForwardStack(entries);
  };
  const int T = static_cast<int>(LoadNpy(dir_ + "input_0.npy").shape[1]);
  for (int B : {1, 3, sequences_}) {
    SCOPED_TRACE(::testing::Message() << "B=" << B);
    CheckStack(dir_, layers(), lstm(), B, sh_->stream, forward);
    EXPECT_NE(rnn[0]->StackFor(B, T), "") << "no choice recorded";
    std::cout << "B=" << B << ": " << rnn[0]->StackFor(B, T) << std::endl;
    CheckStack(dir_, layers(), lstm(), B, sh_->stream, [&](const auto& ios) {
      return ReplayTwice(sh_->stream, [&]() { return forward(ios); });
    });
  }
}

// The same with R in BF16 and in FP16 (layers compiled in those modes; W, x, h and every sum in
// FP32), within the modes' bounds.
TEST_P(StackedKernelTest, HalfWeightsWithinBound) {
  for (const ReducedPrecisionBound& bound : kReducedPrecisionBounds) {
    if (bound.mode != engine::MathMode::kBf16 && bound.mode != engine::MathMode::kFp16) continue;
    MakeFused(bound.mode == engine::MathMode::kBf16 ? engine::cuda::FusedRnnWeights::kBf16
                                                    : engine::cuda::FusedRnnWeights::kFp16);
    if (::testing::Test::HasFatalFailure()) return;
    ASSERT_GE(fused_[0]->max_stack_layers(), layers()) << bound.name;
    for (int units : fused_[0]->stack_units(layers())) {
      for (int B : {1, 3, std::min(sequences_, engine::cuda::FusedRnn::kMaxBatch)}) {
        SCOPED_TRACE(::testing::Message() << bound.name << ", units " << units << ", B=" << B);
        CheckStack(
            dir_, layers(), lstm(), B, sh_->stream,
            [&](const auto& ios) { return ForwardFused(ios, units); }, bound.relative_l2);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, StackedKernelTest,
                         ::testing::Values("TorchLstmStackH128", "TorchGruStackH128",
                                           "TorchLstmStack3H128"),
                         [](const auto& info) { return info.param; });

// A bidirectional layer: both directions in one launch of the batch-tiled kernel (the reverse
// one from each sequence's last valid step), pinned, at every batch size of PyTorch fixtures of
// mixed lengths; y [B, T, 2H], h_n and the LSTM's c_n [2, B, H].
class BidirectionalBatchedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BidirectionalBatchedTest, EveryBatchSizeMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  CheckAlgorithmAtEveryBatchSize(GetParam(), engine::cuda::kFusedBatchedAlgo,
                                 engine::cuda::FusedRnn::kMaxBatchedBatch);
}

// Both directions of a bidirectional layer in one launch of the register kernel (each on blocks
// of its own, the reverse one from each sequence's last valid step), in every number of units a
// block and of groups offered, pinned, at every batch size up to kMaxBatch of PyTorch fixtures
// of mixed lengths; and one launch after the other (as wider layers run where both directions'
// blocks do not fit at once).
class BidirectionalRegisterKernelTest : public PinnedKernelTest {};

TEST_P(BidirectionalRegisterKernelTest, EveryBatchSizeMatchesPyTorch) {
  ASSERT_EQ(f_.spec.directions.size(), 2u);
  ASSERT_FALSE(fused_->register_units().empty()) << "H=" << f_.spec.hidden_size;
  const int most = std::min(f_.sequences, engine::cuda::FusedRnn::kMaxBatch);
  for (int units : fused_->register_units()) {
    for (int batch = 1; batch <= most; ++batch) {
      SCOPED_TRACE(::testing::Message() << "units " << units << ", B=" << batch);
      CheckForward(f_.dir, f_.spec, batch, sh_->stream,
                   [&](const auto& io) { return fused_->ForwardRegisters(io, units); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  for (const auto& [units, groups] : fused_->register_groups()) {
    for (int batch = 2 * groups; batch <= most; ++batch) {
      SCOPED_TRACE(::testing::Message()
                   << "units " << units << ", groups " << groups << ", B=" << batch);
      CheckForward(f_.dir, f_.spec, batch, sh_->stream,
                   [&](const auto& io) { return fused_->ForwardRegisters(io, units, groups); });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  for (int units : fused_->register_units()) {
    for (int batch : {1, 3, most}) {
      SCOPED_TRACE(::testing::Message() << "apart, units " << units << ", B=" << batch);
      CheckForward(f_.dir, f_.spec, batch, sh_->stream, [&](const auto& io) {
        return fused_->ForwardRegisters(io, units, 1, /*apart=*/true);
      });
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, BidirectionalRegisterKernelTest,
                         ::testing::Values("TorchLstmBidirectionalBatchedH128",
                                           "TorchGruBidirectionalBatchedH128"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Torch, BidirectionalBatchedTest,
                         ::testing::Values("TorchLstmBidirectionalBatchedH128",
                                           "TorchGruBidirectionalBatchedH128",
                                           "TorchGruBidirectionalMixedLengths",
                                           "TorchGruWideHidden"),
                         [](const auto& info) { return info.param; });

// The batch-tiled kernel in every shape it is offered (groups x grid size x register tile: the
// FP32 FMA tiles and the tensor-core tiles that keep FP32 accuracy with three TF32 products a
// product, which must meet the same bound; a batch smaller than its groups leaves some empty),
// each pinned,
// at batch sizes 1..64 of fixtures of 64 (LSTM) and 48 (GRU) sequences of mixed lengths at
// H=256: sizes that are not multiples of the tile's 4 or 8 sequences pad the last tile, and
// sizes past 32 need more than one (unit, sequence) cell a thread on the smaller grid. At
// H=512, batches 1..8.
class BatchedKernelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchedKernelTest, EveryShapeMatchesPyTorch) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const std::string dir = "tests/fixtures/torch/" + GetParam() + "/";
  auto model = TorchFixtureModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  const int n = static_cast<int>(LoadNpy(dir + "lengths.npy").shape[0]);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    auto fused = engine::cuda::FusedRnn::Create(spec, stream);
    ASSERT_TRUE(fused.ok()) << fused.status();
    const auto& shapes = (*fused)->batched_shapes();
    using engine::cuda::kBatchedTiles;
    for (int tile = 0; tile < engine::cuda::kBatchedTileCount; ++tile) {
      const bool offered = std::any_of(shapes.begin(), shapes.end(),
                                       [&](const auto& shape) { return shape.tile == tile; });
      // Every FMA tile; never a TF32 one (an FP32 layer).
      if (kBatchedTiles[tile].mma != 3) {
        EXPECT_EQ(offered, kBatchedTiles[tile].mma == 0) << "tile " << tile;
      }
    }
    EXPECT_TRUE(std::any_of(shapes.begin(), shapes.end(),
                            [&](const auto& shape) { return kBatchedTiles[shape.tile].mma == 3; }))
        << "no 3xTF32 tile offered at H=" << spec.hidden_size;
    for (const auto& shape : shapes) {
      for (int batch = 1; batch <= std::min(n, engine::cuda::FusedRnn::kMaxBatchedBatch); ++batch) {
        if (batch > 9 && batch % 8 != 0 && batch % 8 != 1 && batch % 8 != 7 && batch != n) {
          continue;
        }
        SCOPED_TRACE(::testing::Message() << "blocks=" << shape.blocks << " tile=" << shape.tile
                                          << " groups=" << shape.groups << " B=" << batch);
        CheckForward(dir, spec, batch, stream,
                     [&](const auto& io) { return (*fused)->ForwardBatched(io, shape); });
        if (::testing::Test::HasFatalFailure()) break;
      }
      if (::testing::Test::HasFatalFailure()) break;
    }
  }
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Torch, BatchedKernelTest,
                         ::testing::Values("TorchLstmBatchedH256", "TorchGruBatchedH256",
                                           "TorchLstmClusterH512", "TorchGruClusterH512"),
                         [](const auto& info) { return info.param; });

// The batch-tiled kernel's planner (host code: runs without a GPU). A block's gate rows are
// packed four to a quad, so the GRU's 3 rows a unit take 3/4 of the LSTM's quads; the columns
// are split over every thread the tiles leave (KS need not be a power of 2); rows of Ws are
// padded where the first warp's weight loads would share banks; a plan that does not fit in
// shared memory, or whose quads do not split into the tile's, is refused (smem 0).
TEST(BatchedPlanTest, PacksGateRowsAndFitsSharedMemory) {
  constexpr size_t kSmem = 227 * 1024;
  using engine::cuda::PlanFusedBatched;
  // LSTM, 16 units a block (4 groups of 32 blocks at H=512), 2 x 8 tiles, 16 sequences.
  const auto lstm = PlanFusedBatched(16, 512, 4, 32, 1, kSmem);
  EXPECT_EQ(lstm.U, 16);
  EXPECT_EQ(lstm.Q, 16);
  EXPECT_EQ(lstm.tiles, 16);
  EXPECT_EQ(lstm.KS, 16);
  EXPECT_EQ(lstm.tiles * lstm.KS, engine::cuda::kBatchedThreads);
  EXPECT_EQ(lstm.WS, 17);  // 16 quads a row would put a warp's 16 loads on 4 bank positions
  EXPECT_EQ(lstm.chunks, 1);
  EXPECT_GT(lstm.smem, 0u);
  EXPECT_LE(lstm.smem, kSmem);
  // GRU: 48 gate rows are 12 quads, 12 tiles, 21 threads a tile (252 of 256 busy).
  const auto gru = PlanFusedBatched(16, 512, 3, 32, 1, kSmem);
  EXPECT_EQ(gru.Q, 12);
  EXPECT_EQ(gru.tiles, 12);
  EXPECT_EQ(gru.KS, 21);
  EXPECT_GE(gru.WS, gru.Q);
  EXPECT_GT(gru.smem, 0u);
  EXPECT_LT(gru.smem, lstm.smem);
  // 4 GRU units are 3 quads: not a whole number of 2-quad tiles.
  EXPECT_EQ(PlanFusedBatched(64, 512, 3, 128, 1, kSmem).smem, 0u);
  EXPECT_GT(PlanFusedBatched(64, 512, 3, 128, 0, kSmem).smem, 0u);
  // 32 LSTM units of H=1024 are 512 KiB of R: more than a block's shared memory.
  EXPECT_EQ(PlanFusedBatched(8, 1024, 4, 32, 0, kSmem).smem, 0u);
  // Tensor cores (tile 2: 16 quads x 16 sequences a warp, 3xTF32): one warp tile, the columns
  // over the 8 warps; Ws rows of 2 mod 4 float4s and chunk columns padded to 8 mod 16 floats.
  ASSERT_EQ(engine::cuda::kBatchedTiles[2].mma, 3);
  const auto tc = PlanFusedBatched(16, 512, 4, 32, 2, kSmem);
  EXPECT_EQ(tc.Q, 16);
  EXPECT_EQ(tc.tiles, 1);
  EXPECT_EQ(tc.KS, engine::cuda::kBatchedWarps);
  EXPECT_EQ(tc.WS % 4, 2);
  EXPECT_EQ(tc.BS, 24);
  EXPECT_EQ(tc.chunks, 1);  // 512 columns of 24 floats: one chunk of 48 KiB
  EXPECT_GT(tc.smem, 0u);
  // GRU on 8 units a block: 24 rows, padded to 32 (tile 4: 8 quads x 32 sequences).
  ASSERT_EQ(engine::cuda::kBatchedTiles[4].units, 8);
  const auto tc_gru = PlanFusedBatched(32, 512, 3, 64, 4, kSmem);
  EXPECT_EQ(tc_gru.Q, 8);
  EXPECT_EQ(tc_gru.BS, 40);
  EXPECT_EQ(tc_gru.tiles, 1);
  EXPECT_GT(tc_gru.smem, 0u);
  // Warp tiles that do not divide the 8 warps (2 x 3 of 16 quads x 16 sequences): refused, and
  // a tile of more quads than the block's rows take, rounded up to whole M-tiles.
  EXPECT_EQ(PlanFusedBatched(48, 256, 4, 8, 2, kSmem).smem, 0u);
  EXPECT_GT(PlanFusedBatched(32, 256, 4, 8, 2, kSmem).smem, 0u);
  EXPECT_EQ(PlanFusedBatched(16, 512, 4, 64, 2, kSmem).smem, 0u);
  // Past kBatchedMaxBatch sequences, or gates other than 3 or 4: no plan.
  EXPECT_EQ(PlanFusedBatched(engine::cuda::kBatchedMaxBatch + 1, 512, 4, 128, 0, kSmem).smem, 0u);
  EXPECT_EQ(PlanFusedBatched(8, 512, 2, 128, 0, kSmem).smem, 0u);
}

// The batch-tiled kernel's choosers on the 64 LSTM sequences of H=256 of TorchLstmBatchedH256.
class BatchedKernelChooserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RNNSERVE_SKIP_WITHOUT_GPU();
    auto model = TorchFixtureModel(dir);
    if (!model.ok()) GTEST_SKIP() << "no fixture " << dir << ": " << model.status();
    spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
    ASSERT_TRUE(sh.ok());
  }
  const std::string dir = "tests/fixtures/torch/TorchLstmBatchedH256/";
  engine::RecurrentSpec spec;
  StreamAndHandle sh;
};

// Past the cluster and grid kernels' 8 sequences the batch-tiled kernel is offered, and the
// engine's own choice (by timing) matches PyTorch at B=64.
TEST_F(BatchedKernelChooserTest, OffersItPastEightSequences) {
  auto rnn = CudnnRecurrent::Create(spec, "lstm", engine::MathMode::kFp32, sh.handle, sh.stream);
  ASSERT_TRUE(rnn.ok()) << rnn.status();
  const auto algos = (*rnn)->algorithms();
  EXPECT_NE(std::find(algos.begin(), algos.end(), engine::cuda::kFusedBatchedAlgo), algos.end());
  CheckForward(dir, spec, 64, sh.stream, [&](const auto& io) { return (*rnn)->Forward(io); });
  std::cout << "B=64 H=256 T=12: " << (*rnn)->ChoicesSummary() << "\n";
}

// Batch sizes of one bucket (33..64) share the batch-tiled kernel's timing: the first size
// times every shape, the others run its choice (and match PyTorch); the next bucket down has
// none yet.
TEST_F(BatchedKernelChooserTest, BatchSizesOfABucketShareATiming) {
  auto fused = engine::cuda::FusedRnn::Create(spec, sh.stream);
  ASSERT_TRUE(fused.ok()) << fused.status();
  auto batched = [&](const auto& io) {
    return (*fused)->Forward(io, engine::cuda::FusedRnn::Kernel::kBatched);
  };
  CheckForward(dir, spec, 40, sh.stream, batched);
  const std::string timed = (*fused)->BatchedTimingsFor(40);
  EXPECT_FALSE(timed.empty());
  CheckForward(dir, spec, 64, sh.stream, batched);
  CheckForward(dir, spec, 33, sh.stream, batched);
  EXPECT_EQ((*fused)->BatchedTimingsFor(64), timed) << "timed again";
  EXPECT_EQ((*fused)->BatchedKernelFor(33), (*fused)->BatchedKernelFor(40));
  EXPECT_TRUE((*fused)->BatchedTimingsFor(32).empty());
}

// A fused kernel's captured graph bakes in only the batch's longest length (cudnn_rnn.cc,
// GraphKey), so a batch of the same size and longest length whose rows have other lengths
// replays it: the answers are still PyTorch's. Step-level batching's chunks come this way.
TEST(FusedGraphTest, OneGraphServesRowsOfOtherLengths) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const std::string dir = "tests/fixtures/torch/TorchLstmBatchedH256/";
  auto model = TorchFixtureModel(dir);
  if (!model.ok()) GTEST_SKIP() << "no fixture " << dir << ": " << model.status();
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  const std::vector<int> reversed = {7, 6, 5, 4, 3, 2, 1, 0};  // other lengths, same longest
  for (cudnnRNNAlgo_t algo : {engine::cuda::kFusedBatchedAlgo, engine::cuda::kFusedAlgo}) {
    auto rnn = CudnnRecurrent::Create(spec, "lstm", engine::MathMode::kFp32, sh.handle, sh.stream);
    ASSERT_TRUE(rnn.ok()) << rnn.status();
    if (!(*rnn)->ForceAlgorithm(algo).ok()) continue;  // not on this device
    SCOPED_TRACE(::testing::Message() << "algorithm " << static_cast<int>(algo));
    CheckForward(
        dir, spec, 8, sh.stream, [&](const auto& io) { return (*rnn)->Forward(io); }, reversed);
  }
}

// An exact-FP32 GRU (reset_after) of one forward direction is offered the fused kernels, so
// the engine times them against cuDNN's; the one-block kernel is the LSTM's alone.
TEST(FusedGruTest, ChooserOffersFusedAlgorithms) {
  RNNSERVE_SKIP_WITHOUT_GPU();
  const std::string dir = "tests/fixtures/torch/TorchGruClusterH512/";
  auto model = TorchFixtureModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& spec = std::get<engine::RecurrentSpec>(model->layers[0].spec);
  ASSERT_EQ(spec.cell, engine::CellType::kGru);
  int device = 0, clusters = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device), cudaSuccess);
  StreamAndHandle sh;
  ASSERT_TRUE(sh.ok());
  auto rnn = CudnnRecurrent::Create(spec, "gru", engine::MathMode::kFp32, sh.handle, sh.stream);
  ASSERT_TRUE(rnn.ok()) << rnn.status();
  const auto algos = (*rnn)->algorithms();
  auto offered = [&](cudnnRNNAlgo_t a) {
    return std::find(algos.begin(), algos.end(), a) != algos.end();
  };
  EXPECT_TRUE(offered(engine::cuda::kFusedAlgo));
  EXPECT_TRUE(offered(engine::cuda::kFusedBatchedAlgo));
  if (clusters != 0) {
    EXPECT_TRUE(offered(engine::cuda::kFusedClusterAlgo));
  }
  auto fused = engine::cuda::FusedRnn::Create(spec, sh.stream);
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_FALSE((*fused)->has_one_block());
  // reset_after=False: the register kernel at the widths it is compiled for and the batch-tiled
  // kernel (their answers are checked against onnxruntime by gpu_conformance_test's
  // linear_before_reset=0 cases and GruResetBeforeEveryShapeMatchesOnnxruntime); batches of up
  // to 8 go to the register kernel, up to 64 to the batch-tiled one.
  engine::RecurrentSpec before = spec;
  before.reset_after = false;
  auto reset_before = engine::cuda::FusedRnn::Create(before, sh.stream);
  ASSERT_TRUE(reset_before.ok()) << reset_before.status();
  EXPECT_EQ((*reset_before)->register_units().empty(),
            !engine::cuda::FusedRnnRegCompiled(before.hidden_size));
  EXPECT_FALSE((*reset_before)->has_cluster());
  EXPECT_TRUE((*reset_before)->has_batched());
  EXPECT_FALSE((*reset_before)->has_one_block());
  EXPECT_FALSE((*reset_before)->has_one_block_registers());  // H = 512
  EXPECT_TRUE((*reset_before)->Takes(engine::cuda::FusedRnn::kMaxBatchedBatch));
  EXPECT_FALSE((*reset_before)->Takes(engine::cuda::FusedRnn::kMaxBatchedBatch + 1));
  EXPECT_EQ((*reset_before)->KernelTaking(engine::cuda::FusedRnn::kMaxBatch + 1),
            engine::cuda::FusedRnn::Kernel::kBatched);
  if ((*reset_before)->has_grid()) {
    EXPECT_EQ((*reset_before)->KernelTaking(engine::cuda::FusedRnn::kMaxBatch),
              engine::cuda::FusedRnn::Kernel::kGrid);
  }
}

// The one-block kernel (small H; LSTM, and GRU with n's recurrent bias inside r * (...)) at
// each batch size it takes of a fixture with mixed lengths, pinned (the engine times it
// against the grid kernels per batch size). At H=128 the GRU's weights leave room for two
// sequences' states; at H=32 and 64 each thread keeps a gate row of R in registers.
class OneBlockKernelTest : public PinnedKernelTest {};

TEST_P(OneBlockKernelTest, EveryBatchSizeMatchesPyTorch) {
  ASSERT_TRUE(fused_->has_one_block()) << "H=" << f_.spec.hidden_size;
  const int n = f_.sequences;
  const int most = std::min(n, fused_->one_block_max_batch());
  for (int batch = 1; batch <= most; ++batch) {
    SCOPED_TRACE(::testing::Message() << "B=" << batch);
    CheckForward(f_.dir, f_.spec, batch, sh_->stream, [&](const auto& io) {
      return fused_->Forward(io, engine::cuda::FusedRnn::Kernel::kOneBlock);
    });
  }
  // A batch past its largest is refused, not run.
  if (most < n) {
    SCOPED_TRACE(::testing::Message() << "B=" << most + 1 << " (too many)");
    engine::cuda::RecurrentIO io{.B = most + 1, .T = 1};
    EXPECT_EQ(fused_->Forward(io, engine::cuda::FusedRnn::Kernel::kOneBlock).code(),
              absl::StatusCode::kFailedPrecondition);
  }
}

// The one-block register kernel (H up to 64, a unit's rows of R over 1, 2, 4 or 8 lanes'
// registers; one lane only up to 32 units) at every batch size, pinned, a block a group of as
// many sequences as lanes and a block a sequence: LSTM H = 24 (8 of its 32 units idle) and 32,
// GRU H = 64.
class OneBlockRegisterKernelTest : public PinnedKernelTest {};

TEST_P(OneBlockRegisterKernelTest, EveryBatchSizeMatchesPyTorch) {
  ASSERT_TRUE(fused_->has_one_block_registers()) << "H=" << f_.spec.hidden_size;
  const std::vector<int> lanes_offered = fused_->one_block_register_lanes();
  EXPECT_EQ(lanes_offered.front(), f_.spec.hidden_size <= 32 ? 1 : 2);
  for (int lanes : lanes_offered) {
    for (int per_block : {lanes, 1}) {
      for (int batch = 1; batch <= f_.sequences; ++batch) {
        SCOPED_TRACE(::testing::Message()
                     << lanes << " lanes, " << per_block << " a block, B=" << batch);
        CheckForward(f_.dir, f_.spec, batch, sh_->stream, [&](const auto& io) {
          return fused_->ForwardOneBlockRegisters(io, lanes, per_block);
        });
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, OneBlockRegisterKernelTest,
                         ::testing::Values("TorchLstmPackedMixedLengths", "TorchLstmSmallH32",
                                           "TorchGruSmallH64"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Torch, OneBlockKernelTest,
                         ::testing::Values("TorchLstmPackedMixedLengths", "TorchGruClusterH128",
                                           "TorchLstmSmallH32", "TorchGruSmallH64"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rnnserve::testing
